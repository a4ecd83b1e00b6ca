"""An append-only log file rotated by size that never takes the monitor down with it.

A full or read-only log directory must not stop sampling: each kind of failure (no space,
permission denied, ...) prints one line on stderr, which the image sends to `docker logs`;
later lines are dropped (and retried now and then) until writing works again, which is
announced once too. `rotate()` is the one rotation scheme, also used by docker/shared/log-tee.py.

Nothing is opened by a name another account could redirect: the folder is opened once (run as
root, without following a link, and only when root alone controls it: `fileio.not_root_only`),
each file in it with O_NOFOLLOW relative to that descriptor (a regular file only: a FIFO
planted there is refused, never waited on), and rotations rename through the descriptor.
Only after a failure is the folder opened again (a logs folder replaced by a new one).
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import time
from typing import TextIO

from diskinfo.complaints import SayOnce, kind_of, warn
from diskinfo.fileio import not_root_only

RETRY_S = 30.0
FILE_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def rotate(path: str, backups: int, dir_fd: int | None = None) -> None:
    """path -> path.1 -> ... -> path.N, the oldest dropped (supervisord's and logging's scheme);
    with no backups the file is emptied in place (never through a link). With `dir_fd`, `path`
    is a name in that folder and every rename goes through the descriptor."""
    for i in range(backups - 1, 0, -1):
        src = f"{path}.{i}"
        with contextlib.suppress(FileNotFoundError):
            os.replace(src, f"{path}.{i + 1}", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    if backups > 0:
        os.replace(path, f"{path}.1", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    else:
        fd = os.open(
            path, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
        )
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file", path)
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)


def open_log_dir(folder: str) -> int:
    """The log folder's descriptor. Run as root: never through a link, and only a folder root
    alone controls (else PermissionError: root does not write where another account could
    swap the files); as a user, the folder they named."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    if os.geteuid() != 0:
        return os.open(folder, flags)
    fd = os.open(folder, flags | os.O_NOFOLLOW)
    if (part := not_root_only(folder)) is not None:
        os.close(fd)
        raise PermissionError(
            errno.EPERM, f"{part} is writable by an account other than root, and this runs as root"
        )
    return fd


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
        self._dir_fd: int | None = None
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
            folder, name = os.path.split(self.path)
            if self._dir_fd is None:
                os.makedirs(folder or ".", exist_ok=True)
                self._dir_fd = open_log_dir(folder or ".")
            fd = os.open(name, FILE_FLAGS, 0o644, dir_fd=self._dir_fd)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OSError(errno.EINVAL, "not a regular file")
            self._file = io.FileIO(fd, "r+")
            self._size = self._file.seek(0, os.SEEK_END)
            if self._size and os.pread(fd, 1, self._size - 1) != b"\n":
                # end the line a full disk, a kill or a power loss cut, so the first line of
                # this write is not glued to it (and lost with it)
                self._size += _write_all(self._file, b"\n")
        return self._file

    def _rotate(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        rotate(os.path.basename(self.path), self.backups, self._dir_fd)

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
            self._close_folder()
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

    def _close_folder(self) -> None:
        """After a failure or at the end: the next write opens the folder again."""
        if self._dir_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._dir_fd)
            self._dir_fd = None

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._file.fileno())
        self._close_quietly()
        self._close_folder()


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
