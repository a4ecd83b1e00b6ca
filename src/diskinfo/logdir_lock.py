"""One monitor per log directory: a second one refuses with one line naming the first.

Two monitors appending to the same diskinfo.log and diskinfo.jsonl interleave their records,
and `diskinfo report` would then read one run with twice the records. The running monitor
holds an exclusive flock on `LOG_DIR/diskinfo.lock` for its whole life and writes who it is
into the file. The kernel drops the lock with the process, so the file a crashed or killed
monitor leaves behind never blocks the next one. flock works across containers that share a
bind-mounted directory (same kernel, same inode).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from typing import TextIO

from diskinfo import logfiles
from diskinfo.complaints import warn
from diskinfo.errors import UserError
from diskinfo.owner import owner_text, parse_owner

FILENAME = logfiles.LOCK


def _holder(fd: int, here: str) -> str:
    """Who holds the lock, in words, from what it wrote (and /proc, when it is ours to see)."""
    with contextlib.suppress(OSError):
        os.lseek(fd, 0, os.SEEK_SET)
    try:
        text = os.read(fd, 4096).decode("utf-8", "replace")
    except OSError:
        text = ""
    info = parse_owner(text)
    pid = info.get("pid", "?")
    command = info.get("command", "")
    if pid.isdigit() and info.get("host", here) == here:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip() or command
    where = "" if info.get("host", here) == here else f" on host {info['host']}"
    since = f", since {info['started']}" if info.get("started") else ""
    return f"pid {pid}{where}: `{command[:200] or 'unknown command'}`{since}"


class LogDirLock:
    """Taken at construction (UserError, exit 1, when another monitor holds it); released by
    close() or at the end of a `with` block: `diskinfo watch` holds it in an ExitStack around
    building and running the monitor, so it is released after the sinks have closed, and at
    once when building fails. Not a sink: nothing is written per interval."""

    def __init__(self, log_dir: str, stderr: TextIO | None = None) -> None:
        self.path = os.path.join(log_dir, FILENAME)
        self._fd: int | None = None
        flags = os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            os.makedirs(log_dir, exist_ok=True)
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | flags, 0o644)
            except PermissionError:  # another uid's file: reading is enough to hold a flock
                fd = os.open(self.path, os.O_RDONLY | flags)
        except OSError as exc:  # read-only or full directory: the log sinks say so too
            warn(
                f"cannot lock {self.path}: {exc.strerror or exc}; a second monitor on this "
                "directory would not be refused",
                stderr,
            )
            return
        here = socket.gethostname()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd, here)
            os.close(fd)
            raise UserError(
                f"another diskinfo monitor writes to {os.path.abspath(log_dir)} ({holder}); "
                "stop it, or give this one its own --log-dir",
                exit_code=1,
            ) from None
        self._fd = fd
        with contextlib.suppress(OSError):  # read-only descriptor: held, just not described
            os.ftruncate(fd, 0)
            os.pwrite(fd, owner_text().encode(), 0)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # releases the flock; the file stays for the next monitor
            self._fd = None

    def __enter__(self) -> LogDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
