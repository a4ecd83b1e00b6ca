"""An append-only log file rotated by size that never takes the monitor down with it.

A full or read-only log directory must not stop sampling: the first failure prints one
warning on stderr, later lines are dropped (and retried now and then) until writing works
again, which is announced once too.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import TextIO

RETRY_S = 30.0


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
        self._file: TextIO | None = None
        self._size = 0
        self._failed_at: float | None = None
        self.dropped = 0

    def _warn(self, text: str) -> None:
        print(f"diskinfo: warning: {text}", file=self._stderr or sys.stderr, flush=True)

    def _open(self) -> TextIO:
        if self._file is None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
            self._size = self._file.tell()
            if self._size and self._failed_at is not None and not self._ends_with_newline():
                self._file.write("\n")  # end the line cut short when the disk was full
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
        for i in range(self.backups - 1, 0, -1):
            src = f"{self.path}.{i}"
            if os.path.exists(src):
                os.replace(src, f"{self.path}.{i + 1}")
        if self.backups > 0:
            os.replace(self.path, f"{self.path}.1")
        else:
            os.truncate(self.path, 0)

    def write(self, text: str) -> bool:
        """Append text (whole lines); False if it was dropped because writing fails."""
        now = time.monotonic()
        if self._failed_at is not None and now - self._failed_at < RETRY_S:
            self.dropped += 1
            return False
        try:
            f = self._open()
            if self._size and self._size + len(text) > self.max_bytes:
                self._rotate()
                f = self._open()
            f.write(text)
            f.flush()
            self._size += len(text.encode("utf-8", "replace"))
        except (OSError, ValueError) as exc:
            self._close_quietly()
            if self._failed_at is None:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
                self._warn(f"cannot write {self.path}: {reason}; sampling goes on without it")
            self._failed_at = now
            self.dropped += 1
            return False
        if self._failed_at is not None:
            self._warn(f"writing {self.path} again ({self.dropped} lines were dropped)")
            self._failed_at = None
            self.dropped = 0
        return True

    def _close_quietly(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None

    def close(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
            except OSError:
                pass
            self._close_quietly()
