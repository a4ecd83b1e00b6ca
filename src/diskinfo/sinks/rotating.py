"""An append-only log file rotated by size that never takes the monitor down with it.

A full or read-only log directory must not stop sampling: each kind of failure (no space,
permission denied, ...) prints one line on stderr, which the image sends to `docker logs`;
later lines are dropped (and retried now and then) until writing works again, which is
announced once too. `rotate()` is the one rotation scheme, also used by docker/run/log-tee.py.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import time
from typing import TextIO

from diskinfo.sinks.complaints import SayOnce, kind_of, warn

RETRY_S = 30.0


def rotate(path: str, backups: int) -> None:
    """path -> path.1 -> ... -> path.N, the oldest dropped (supervisord's and logging's scheme);
    with no backups the file is emptied in place."""
    for i in range(backups - 1, 0, -1):
        src = f"{path}.{i}"
        if os.path.exists(src):
            os.replace(src, f"{path}.{i + 1}")
    if backups > 0:
        os.replace(path, f"{path}.1")
    else:
        os.truncate(path, 0)


def _reason(exc: Exception, path: str) -> str:
    """The failure in words, with what the user needs to fix a permission problem."""
    if not isinstance(exc, OSError) or not exc.strerror:
        return str(exc)
    if exc.errno in (errno.EACCES, errno.EPERM):
        with contextlib.suppress(OSError):
            st = os.stat(path if os.path.exists(path) else os.path.dirname(path) or ".")
            return f"{exc.strerror} (owner uid {st.st_uid}; the monitor runs as uid {os.getuid()})"
    return exc.strerror


class RotatingFile:
    def __init__(
        self,
        path: str,
        max_bytes: int = 20 * 2**20,
        backups: int = 5,
        stderr: TextIO | None = None,
    ) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._stderr = stderr
        self._file: io.FileIO | None = None
        self._size = 0
        self._failed_at: float | None = None
        self._say = SayOnce()  # failure kinds already reported in this outage
        self.dropped = 0

    def _warn(self, text: str) -> None:
        warn(text, self._stderr)

    def _open(self) -> io.FileIO:
        """The file, unbuffered: each `write` is one write(2) of whole lines (no copy through
        a text layer and a buffer to flush: this runs twice a second)."""
        if self._file is None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._file = io.FileIO(self.path, "a")
            self._size = self._file.seek(0, os.SEEK_END)
            if self._size and not self._ends_with_newline():
                # end the line a full disk, a kill or a power loss cut, so the first line of
                # this write is not glued to it (and lost with it)
                self._size += _write_all(self._file, b"\n")
        return self._file

    def _ends_with_newline(self) -> bool:
        try:
            with open(self.path, "rb") as f:
                f.seek(-1, os.SEEK_END)
                return f.read(1) == b"\n"
        except OSError:
            return True

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        rotate(self.path, self.backups)

    def write(self, text: str | bytes) -> bool:
        """Append whole lines (text, or bytes already UTF-8); False if they were dropped
        because writing fails."""
        now = time.monotonic()
        if self._failed_at is not None and now - self._failed_at < RETRY_S:
            self.dropped += 1
            return False
        try:
            data = text.encode("utf-8", "replace") if isinstance(text, str) else text
            f = self._open()
            if self._size and self._size + len(data) > self.max_bytes:
                self._rotate()
                f = self._open()
            self._size += _write_all(f, data)
        except (OSError, ValueError) as exc:
            self._close_quietly()
            self._say(
                kind_of(exc),
                f"cannot write {self.path}: {_reason(exc, self.path)}; its lines are dropped "
                "until writing works again, sampling goes on",
                self._stderr,
            )
            self._failed_at = now
            self.dropped += 1
            return False
        if self._failed_at is not None:
            self._warn(f"writing {self.path} again ({self.dropped} lines were dropped)")
            self._failed_at = None
            self._say.reset()
            self.dropped = 0
        return True

    def _close_quietly(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._file.fileno())
            self._close_quietly()


def _write_all(f: io.FileIO, data: bytes) -> int:
    """Write all of data (a regular file takes it in one call unless the disk fills); a
    write that makes no progress is an error, never a loop that spins."""
    done = 0
    while done < len(data):
        written = f.write(data[done:] if done else data)
        if not written:
            raise OSError(errno.EIO, "write(2) wrote nothing")
        done += written
    return done
