"""The monitor's heartbeat: a file whose age says whether sampling still goes on.

A monitor that is alive but not sampling (stopped with SIGSTOP, stuck in a read of a hung
mount) passes every check of its process, while /metrics is dead. So after a sample the
monitor touches `$DISKINFO_STATE_DIR/heartbeat` (one utime call), at most every TOUCH_S, and
the container's health check (docker/run/healthcheck.sh) fails when the file is older than
3 x interval + 10 s. TOUCH_S keeps a beat well inside that for any interval (the file is at
most TOUCH_S + interval old while sampling goes on) and saves the syscall most seconds: a
cold syscall costs as much as the rest of a sample's Python (benchmarks/results/overhead.md).

One heartbeat, one owner: a second `diskinfo watch` in the same state directory leaves the
file alone while the monitor that wrote it lives, so it can neither hide that one stopping
nor delete its file when it ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from diskinfo.complaints import SayOnce, kind_of
from diskinfo.fileio import write_atomic
from diskinfo.loader_state import pid_alive, state_dir
from diskinfo.owner import owner_text, parse_owner
from diskinfo.record import IntervalRecord

FILENAME = "heartbeat"
TOUCH_S = 5.0


def heartbeat_path() -> Path:
    """`$DISKINFO_STATE_DIR/heartbeat` (the image: /run/diskinfo/heartbeat)."""
    return state_dir() / FILENAME


def read(path: Path) -> dict[str, str]:
    """The key=value lines of a heartbeat file ({} when missing or unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read(4096)
    except OSError:
        return {}
    return parse_owner(text)


def _monitor_alive(pid: int) -> bool:
    """Is pid a live diskinfo process (not a dead monitor's number, reused by another)?"""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"diskinfo" in f.read()
    except OSError:
        return True  # alive, and not ours to look at


class HeartbeatSink:
    """Monitor sink: writes the heartbeat at the first sample, then touches it after a sample
    that comes TOUCH_S or more after the last beat."""

    def __init__(
        self,
        interval: float,
        path: Path | None = None,
        command: list[str] | None = None,
        stderr: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path) if path is not None else heartbeat_path()
        self.interval = interval
        self.command = " ".join(command if command is not None else sys.argv)
        self._stderr = stderr
        self._owner = False
        self._say = SayOnce()
        self._clock = clock
        self._beat_at = float("-inf")

    def text(self) -> str:
        return owner_text(self.command, interval_s=f"{self.interval:g}")

    def _other_owner(self) -> int | None:
        """The PID of another live monitor that owns the heartbeat, if any."""
        try:
            pid = int(read(self.path).get("pid", ""))
        except ValueError:
            return None
        return pid if pid != os.getpid() and _monitor_alive(pid) else None

    def write(self, record: IntervalRecord) -> None:
        now = self._clock()
        if now - self._beat_at < TOUCH_S:
            return
        self._beat_at = now
        try:
            if self._owner:
                try:
                    os.utime(self.path)
                    self._say.reset()
                    return
                except FileNotFoundError:
                    self._owner = False  # removed under us (a cleaned /run): write it anew
            if self._other_owner() is not None:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, self.text())
            self._owner = True
            self._say.reset()
        except OSError as exc:
            self._say(
                kind_of(exc),
                f"cannot write the heartbeat {self.path}: {exc.strerror or exc}; the health "
                "check will call this monitor stopped, sampling goes on",
                self._stderr,
            )

    def close(self) -> None:
        """A monitor that ends cleanly takes its heartbeat with it: a stale file never
        looks like a live monitor."""
        if self._owner and read(self.path).get("pid") == str(os.getpid()):
            with contextlib.suppress(OSError):
                self.path.unlink()
        self._owner = False
