"""The processes the monitor watches, read cheaply: snapshots of the training command's tree
and of the trees of the processes that publish loader figures."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from diskinfo import loader_state
from diskinfo.sources.schedstat import run_wait_s
from diskinfo.utf8 import utf8_text

MAX_PROCESSES = 256
TREE_RESCAN_S = 5.0  # a new worker set (each epoch without persistent_workers) shows within


@dataclass(frozen=True)
class ProcSnapshot:
    pid: int
    ppid: int
    name: str
    create_time: float
    read_bytes: int
    rchar: int
    cpu_s: float  # user + system seconds
    cmdline: str = ""
    run_wait_s: float = 0.0  # seconds runnable but waiting for a CPU (/proc/PID/schedstat)

    @property
    def key(self) -> tuple[int, float]:
        return (self.pid, self.create_time)  # a reused PID is a different process


class LivePublishers:
    """PIDs that publish loader figures and still run: a state file's PID whose process
    started before the file's last write (a PID that a finished run left behind and another
    process reuses is not one). Read every interval: a file found to be a finished run's is
    not looked at again while it stays as it was, since runs killed without their clean-up
    leave files behind, and 28 of them cost a /proc read each, 1.2 ms a sample, 1.5x the rest
    of the monitor."""

    def __init__(self) -> None:
        self._finished: dict[int, int] = {}  # pid -> its file's mtime (ns) when found finished
        self._live: dict[int, int] = {}  # pid -> its file's mtime (ns), found live
        self._stamp = loader_state.FolderStamp()

    def _is_live(self, pid: int, written: int) -> bool:
        try:
            return psutil.Process(pid).create_time() <= written / 1e9 + 1.0
        except psutil.Error:
            return False

    def __call__(self, directory: Path) -> set[int]:
        # while the folder is as it was last listed, its files are too: only the live
        # publishers' processes need a look
        if self._stamp.unchanged(directory):
            for pid, written in list(self._live.items()):
                if not self._is_live(pid, written):
                    del self._live[pid]
                    self._finished[pid] = written
            return set(self._live)
        self._stamp.listing()
        prefix, suffix = loader_state.FILE_PREFIX, ".json"
        try:
            with os.scandir(directory) as it:
                entries = [e for e in it if e.name.startswith(prefix) and e.name.endswith(suffix)]
        except OSError:
            entries = []
        live: dict[int, int] = {}
        present: set[int] = set()
        for entry in entries:
            stem = entry.name[len(prefix) : -len(suffix)]
            if not stem.isdigit():
                continue
            pid = int(stem)
            try:
                written = entry.stat(follow_symlinks=False).st_mtime_ns
            except OSError:
                continue
            present.add(pid)
            if self._finished.get(pid) == written:
                continue
            if self._is_live(pid, written):
                live[pid] = written
                self._finished.pop(pid, None)
            else:
                self._finished[pid] = written
        for gone in set(self._finished) - present:
            del self._finished[gone]
        self._live = live
        return set(live)


class TreeReader:
    """Reads the trees cheaply: finding descendants scans every PID on the machine, so the
    member list is refreshed only every `TREE_RESCAN_S` (or when the roots change, or a member
    is gone or exec'd another program); command lines are read once per process and program."""

    def __init__(self) -> None:
        self._roots: tuple[int, ...] | None = None
        self._members: list[psutil.Process] = []
        self._scanned = -TREE_RESCAN_S
        self._static: dict[tuple[int, float], tuple[str, str]] = {}

    def _rescan(self, roots: tuple[int, ...]) -> None:
        self._roots, self._scanned = roots, time.monotonic()
        members: dict[int, psutil.Process] = {}
        for root in roots:
            if root in members:  # a publisher inside the training command's tree
                continue
            try:
                top = psutil.Process(root)
                for proc in [top, *top.children(recursive=True)]:
                    members.setdefault(proc.pid, proc)
            except psutil.Error:
                continue
        self._members = list(members.values())[:MAX_PROCESSES]

    def read(self, roots: int | tuple[int, ...]) -> list[ProcSnapshot]:
        roots = (roots,) if isinstance(roots, int) else roots
        if roots != self._roots or time.monotonic() - self._scanned >= TREE_RESCAN_S:
            self._rescan(roots)
        out, exec_seen = self._read_members()
        # a member gone: its successors may be new; one that became another program (the
        # shell of `bash -c "pip install ... && python train.py"` execs python): its children
        if len(out) < len(self._members) or exec_seen:
            self._rescan(roots)
            out, _ = self._read_members()
        return out

    def _read_members(self) -> tuple[list[ProcSnapshot], bool]:
        """The members' snapshots, and whether one of them exec'd since the last read."""
        out = []
        exec_seen = False
        for proc in self._members:
            try:
                with proc.oneshot():
                    try:
                        io = proc.io_counters()
                        read_bytes, rchar = io.read_bytes, getattr(io, "read_chars", 0)
                    except (psutil.AccessDenied, AttributeError):
                        read_bytes = rchar = 0
                    cpu = proc.cpu_times()
                    born = proc.create_time()
                    # from the stat file cpu_times read (oneshot); names are the kernel's bytes
                    name = utf8_text(proc.name())
                    static = self._static.get((proc.pid, born))
                    if static is None or static[0] != name:  # new, or exec'd another program
                        exec_seen = exec_seen or static is not None
                        static = (name, utf8_text(" ".join(proc.cmdline()))[:200])
                        self._static[(proc.pid, born)] = static
                    out.append(
                        ProcSnapshot(
                            pid=proc.pid,
                            ppid=proc.ppid(),
                            name=static[0],
                            create_time=born,
                            read_bytes=read_bytes,
                            rchar=rchar,
                            cpu_s=cpu.user + cpu.system,
                            cmdline=static[1],
                            run_wait_s=run_wait_s(proc.pid),
                        )
                    )
            except psutil.Error:
                continue
        if len(self._static) > 4 * MAX_PROCESSES:
            live = {(p.pid, p.create_time) for p in out}
            self._static = {k: v for k, v in self._static.items() if k in live}
        return out, exec_seen
