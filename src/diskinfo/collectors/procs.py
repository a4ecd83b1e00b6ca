"""Who reads how much: the training processes and their trees (DataLoader workers included).

The roots: the PID in `--pid-file` (/run/pytorch-cuda/train.pid in the image), and every live
process that publishes loader figures (`diskinfo.torch.watch`), whatever started it: a
notebook kernel, a script run over SSH or `docker exec` is no child of the training command,
and its CPU is what the verdict weighs against the cores. Per process:
`read_bytes` (what the storage layer fetched for it, /proc/PID/io) and `rchar` (every read()
byte, page-cache hits included), as rates over the measured interval, plus CPU % of one core.
A parent's counters gain a reaped child's whole-life I/O (the kernel adds it on wait()), so
what each reaped child was last seen to have read is taken off its parent's next increases
(`settle`). Rates are pure functions of two snapshots (read by `proctree`); roles come from
`roles`.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from diskinfo import loader_state
from diskinfo.collectors import BaseCollector
from diskinfo.collectors.datafiles import open_files, unwatched_folders
from diskinfo.collectors.proctree import (
    LivePublishers,
    ProcSnapshot,
    TreeReader,
)
from diskinfo.collectors.roles import ROLE_ORDER, assign_roles
from diskinfo.record import CommandEnd, IntervalRecord, ProcessIO

UNWATCHED_REFRESH_S = 30.0  # how often the loop's open files are looked at (datafiles)
LOOP_ROLES = ("main", "worker")  # the processes that read samples


def parse_pid_file(text: str) -> int:
    """The first token as a PID; ValueError for anything else."""
    token = text.strip().split()[0] if text.strip() else ""
    pid = int(token)
    if pid <= 0:
        raise ValueError(f"not a PID: {token!r}")
    return pid


YOUNG_INTERVALS = 3.0


def process_rates(
    previous: Mapping[tuple[int, float], ProcSnapshot],
    current: Iterable[ProcSnapshot],
    roles: Mapping[int, str],
    elapsed_s: float,
    now: float | None = None,
) -> list[ProcessIO]:
    """Per-process read and CPU rates. A process first seen now that began at most
    YOUNG_INTERVALS intervals ago (`now`: the wall clock of this reading) counts from its own
    start: its reads over the interval (or its life, if longer), its CPU over its life
    (DataLoader workers are reborn every epoch without persistent_workers); an older one
    first seen now has no figure yet (0)."""
    out: list[ProcessIO] = []
    for cur in current:
        prev = previous.get(cur.key)
        age = now - cur.create_time if now is not None else None
        young = prev is None and age is not None and age <= YOUNG_INTERVALS * elapsed_s
        if young:
            prev = dataclasses.replace(cur, read_bytes=0, rchar=0, cpu_s=0.0, run_wait_s=0.0)
        io = ProcessIO(pid=cur.pid, name=cur.name, role=roles.get(cur.pid, "child"))
        io.read_bytes_total = cur.read_bytes
        if prev is not None and elapsed_s > 0:
            reads_s = max(elapsed_s, age or 0.0) if young else elapsed_s
            cpu_s = max(0.1, age or 0.0) if young else elapsed_s
            io.read_mb_s = max(0, cur.read_bytes - prev.read_bytes) / 2**20 / reads_s
            io.rchar_mb_s = max(0, cur.rchar - prev.rchar) / 2**20 / reads_s
            io.cpu_percent = 100.0 * max(0.0, cur.cpu_s - prev.cpu_s) / cpu_s
            io.cpu_wait_percent = 100.0 * max(0.0, cur.run_wait_s - prev.run_wait_s) / cpu_s
        out.append(io)
    out.sort(key=lambda p: (ROLE_ORDER.get(p.role, 9), -p.read_mb_s, p.pid))
    return out


OWED_INTERVALS = 3  # a reaped child's I/O reaches its parent's counters within this many


@dataclass
class Owed:
    """I/O a parent's counters will gain from children it reaped, not its own reads."""

    read_bytes: int = 0
    rchar: int = 0
    intervals: int = 0


def settle(
    owed: Mapping[tuple[int, float], Owed],
    previous: Mapping[tuple[int, float], ProcSnapshot],
    current: Iterable[ProcSnapshot],
) -> tuple[dict[tuple[int, float], ProcSnapshot], dict[tuple[int, float], Owed]]:
    """(previous snapshots with each parent's baseline raised by what it is owed, what stays
    owed). When a parent reaps a child the kernel adds the child's whole-life I/O to the
    parent's /proc/PID/io: a DataLoader without persistent_workers reaps its workers every
    epoch, and its main process would show every byte they read a second time, in one
    interval. The child's counters as last seen are taken off the parent's next increases."""
    live = {p.key: p for p in current}
    by_pid = {p.pid: p for p in live.values() if p.key in previous}  # parents seen twice
    left = {key: dataclasses.replace(o) for key, o in owed.items() if key in live}
    for gone in previous.values():
        parent = by_pid.get(gone.ppid)
        if gone.key not in live and parent is not None:
            debt = left.setdefault(parent.key, Owed())
            debt.read_bytes += gone.read_bytes
            debt.rchar += gone.rchar
            debt.intervals = 0
    adjusted = dict(previous)
    for key, debt in list(left.items()):
        cur, prev = live[key], previous.get(key)
        if prev is None:
            del left[key]
            continue
        take_read = min(debt.read_bytes, max(0, cur.read_bytes - prev.read_bytes))
        take_rchar = min(debt.rchar, max(0, cur.rchar - prev.rchar))
        adjusted[key] = dataclasses.replace(
            prev, read_bytes=prev.read_bytes + take_read, rchar=prev.rchar + take_rchar
        )
        debt.read_bytes -= take_read
        debt.rchar -= take_rchar
        debt.intervals += 1
        if not (debt.read_bytes or debt.rchar) or debt.intervals >= OWED_INTERVALS:
            del left[key]  # paid, or reaped by another process (re-parented): forget it
    return adjusted, left


SECRET_WORDS = ("token", "key", "secret", "password", "passwd")


def command_line(cmdline: str) -> str:
    """A command line to keep in the JSONL: the values of options named like secrets
    (`--api-key=X`, `--token X`) replaced by ***, so a log shared for help leaks none."""
    words = cmdline.split()
    for i, word in enumerate(words):
        name, eq, _value = word.partition("=")
        if not word.startswith("-") or not any(w in name.lower() for w in SECRET_WORDS):
            continue
        if eq:
            words[i] = f"{name}=***"
        elif i + 1 < len(words) and not words[i + 1].startswith("-"):
            words[i + 1] = "***"
    return " ".join(words)


def command_end(pid_file: str) -> CommandEnd | None:
    """The exit status the image's run-train.sh writes to `train/exit` beside the PID file,
    when it is this command's (written after the PID file); None while it runs, or outside
    the image."""
    pid = Path(pid_file)
    exit_file = pid.parent / "train" / "exit"
    try:
        started, ended = pid.stat().st_mtime, exit_file.stat().st_mtime
        if ended < started:
            return None  # an earlier command's
        with open(exit_file, encoding="ascii", errors="replace") as f:
            code = int(f.read(16).strip())
    except (OSError, ValueError):
        return None
    return CommandEnd(code, ended - started, ended)


class ProcsCollector(BaseCollector):
    """Rates of the training command's process tree, from `--pid-file`, and of the trees of
    the processes that publish loader figures."""

    def __init__(
        self, pid_file: str | None, state_dir: Path | None = None, watched: Sequence[str] = ()
    ) -> None:
        super().__init__()
        # the watched paths, against which the training's open data files are held
        self.watched = list(watched)
        self._unwatched: set[str] = set()
        self._files_at = -UNWATCHED_REFRESH_S
        self.pid_file = pid_file
        self.state_dir = state_dir if state_dir is not None else loader_state.state_dir()
        self._previous: dict[tuple[int, float], ProcSnapshot] = {}
        self._tree = TreeReader()
        self._publishers = LivePublishers()
        self._seen: int | None = None  # the last training PID seen running
        self._owed: dict[tuple[int, float], Owed] = {}
        self._started = time.time()
        self._end_said = False

    def start(self) -> None:
        """The first look, before the first interval: a command running now and gone by the
        first sample ran and ended (a run shorter than one interval), not a stale PID file."""
        self._started = time.time()
        if self.pid_file is None:
            return
        # quiet: the first fill says what is wrong with the file, if that lasts
        if (root := self._root(quiet=True)) is not None and psutil.pid_exists(root):
            self._seen = root

    def ended(self) -> CommandEnd | None:
        """How the training command ended, where the image records it (None: running, or
        not known)."""
        return command_end(self.pid_file) if self.pid_file is not None else None

    def _new_end(self) -> CommandEnd | None:
        """The command's end, once, when it came after this monitor started (an exit file
        from before it is an earlier start's, whose PID file the new command has yet to
        replace)."""
        if self._end_said or self.pid_file is None:
            return None
        end = self.ended()
        return end if end is not None and (end.at or 0) >= self._started else None

    def unsaid(self) -> bool:
        return self._new_end() is not None

    def _written_since_start(self) -> bool:
        """A PID file written while this monitor ran names a command that ran in that time."""
        assert self.pid_file is not None
        try:
            return Path(self.pid_file).stat().st_mtime > self._started
        except OSError:
            return False

    def _root(self, quiet: bool = False) -> int | None:
        assert self.pid_file is not None
        try:
            text = Path(self.pid_file).read_text()
            if not text.strip():
                return None  # the image's file before a command starts, or with none to run
            return parse_pid_file(text)
        except FileNotFoundError:
            problem = f"procs: no training PID in {self.pid_file} yet"
        except (OSError, ValueError, IndexError) as exc:
            problem = f"procs: unreadable PID file {self.pid_file}: {exc}"
        if not quiet:
            self.notes.once(problem)
        return None

    def fill(self, record: IntervalRecord) -> None:
        if (end := self._new_end()) is not None:
            record.command_end = end
            self._end_said = True
        root = self._root() if self.pid_file is not None else None
        loops = self._publishers(self.state_dir)
        roots = tuple(sorted(loops | ({root} if root is not None else set())))
        tree = self._tree.read(roots) if roots else []
        if root is not None and not any(p.pid == root for p in tree):
            # one that ran and ended is no fault: the verdict says no training command runs;
            # one never seen running, in a file older than this monitor, is worth a word (a
            # PID file left from an earlier run?)
            if root != self._seen and not self._written_since_start():
                self.notes.once(f"procs: training PID {root} is not running")
        elif root is not None:
            self._seen = root
        self.notes.flush(record)
        if not tree:
            self._previous = {}
            return
        roles = assign_roles(tree, root if root is not None else -1, loops)
        named = next((p for p in tree if p.pid == root), None) or next(
            (p for p in tree if p.pid in loops and roles.get(p.pid) == "main"), None
        )
        record.command = command_line(named.cmdline) if named is not None else ""
        previous, self._owed = settle(self._owed, self._previous, tree)
        record.procs = process_rates(previous, tree, roles, record.elapsed_s, time.time())
        self._previous = {p.key: p for p in tree}
        self._look_for_unwatched(roles)
        record.unwatched_data = sorted(self._unwatched)

    def _look_for_unwatched(self, roles: Mapping[int, str]) -> None:
        """Every UNWATCHED_REFRESH_S, the folders of the data files the loop's processes hold
        open that no watched path covers: said once each, kept for the run."""
        now = time.monotonic()
        if not self.watched or now - self._files_at < UNWATCHED_REFRESH_S:
            return
        self._files_at = now
        files = [f for pid, role in roles.items() if role in LOOP_ROLES for f in open_files(pid)]
        new = unwatched_folders(files, self.watched) - self._unwatched
        if new:
            self._unwatched |= new
            self.notes.once(
                f"the training reads data in {', '.join(sorted(new))}, which no watched path "
                f"({', '.join(self.watched)}) covers: the disk figures, the verdict's disk "
                "rules and the dataset's size are not about that data; watch it too (diskinfo "
                "watch PATH ..., in the image DISKINFO_PATHS)"
            )
