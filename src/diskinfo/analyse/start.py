"""The start judged: before the loop's first batch, what the training does and what holds it.

A training command spends its first seconds, sometimes minutes, before any batch: importing
torch reads 1-2 GB of shared libraries (from a slow NFS or Lustre home, or through the
container's read cap, that is minutes), the dataset's index is read, modules are compiled on
the CPU. Until the loop publishes figures (`diskinfo.torch`), the verdict says which of these
it sees, from the training processes' own reads and CPU and the container's cgroup (docs/
verdicts.md, "The start"):

- reading at a cap: the processes read, and the container's reads sit at its cgroup limit;
- reading: the processes read from the disk or a network filesystem, with little CPU;
- CPU-bound: a process uses most of a core (importing, compiling, building the dataset);
- waiting: neither (a lock, the network, a rendezvous with other ranks).

The "wrap it" hint waits until the loop is known to run unseen: DataLoader workers exist, or
the processes stopped reading as a start reads; never while they still read as one does.
"""

from __future__ import annotations

from enum import Enum

from diskinfo import thresholds as t
from diskinfo.analyse.fixes import cap_words, mb
from diskinfo.analyse.signals import read_caps
from diskinfo.record import IntervalRecord, ProcessIO


class StartState(str, Enum):
    """What a start is doing; the value is its words in the `[Run]` line."""

    CAPPED = "reading at the container's read cap"
    READING = "reading from the disk or a network filesystem"
    CPU = "CPU-bound (importing, compiling, building the dataset)"
    WAITING = "waiting (no reads, little CPU)"


WHAT = "its libraries, the dataset's index or data"  # /proc/PID/io does not say which files


def _training(procs: list[ProcessIO]) -> list[ProcessIO]:
    return [p for p in procs if p.role != "monitor"]


def _reads(procs: list[ProcessIO]) -> float:
    return sum(p.read_mb_s for p in _training(procs))


def start_state(record: IntervalRecord) -> StartState:
    """The state of a start, from the record alone (the report words a run's start by it)."""
    procs = _training(record.procs)
    reads = _reads(procs)
    if reads >= t.DISK_READING_MB_S and any(read_caps(c) for c in record.cgroup_io):
        return StartState.CAPPED
    # what a process would use on an idle host: a start that waits for a core is CPU-bound
    busiest = max((p.cpu_percent + p.cpu_wait_percent for p in procs), default=0.0)
    if busiest >= t.PROC_SATURATED_PCT:
        return StartState.CPU
    if reads >= t.DISK_READING_MB_S:
        return StartState.READING
    return StartState.WAITING


def start_words(record: IntervalRecord) -> str:
    """The start's state in words, with its figures."""
    procs = _training(record.procs)
    reads = _reads(procs)
    total = sum(p.read_bytes_total for p in procs) / 2**20
    cpu = sum(p.cpu_percent for p in procs)
    state = start_state(record)
    so_far = f"{mb(total)} so far" if total else "just begun"
    if state == StartState.CAPPED:
        c = next(c for c in record.cgroup_io if read_caps(c))
        return (
            f"reading {reads:.1f} MB/s ({so_far}: {WHAT}) at this container's cgroup read cap"
            f" ({cap_words(c)} on {c.device}), CPU {cpu:.0f}% of a core: the cap sets how long "
            "the start takes"
        )
    if state == StartState.READING:  # from where: /proc/PID/io does not say which device
        return (
            f"reading {reads:.1f} MB/s ({so_far}: {WHAT}) with {cpu:.0f}% of a core: the "
            "filesystem's speed sets how long the start takes"
        )
    if state == StartState.CPU:
        waited = sum(p.cpu_wait_percent for p in procs)
        neighbour = (
            f" and waiting for a core {waited:.0f}% (the host's other work takes it)"
            if waited >= t.CPU_WAIT_SHOWN_PCT
            else ""
        )
        return (
            f"CPU-bound: {cpu:.0f}% of a core{neighbour}, reading {reads:.1f} MB/s (importing "
            "modules, compiling, building the dataset)"
        )
    return (
        f"waiting: reading {reads:.1f} MB/s with {cpu:.0f}% of a core (a lock, the network, "
        "or a rendezvous with other ranks)"
    )


def loop_runs_unseen(record: IntervalRecord) -> bool:
    """The training runs a loop the monitor cannot see: no loop figures, and DataLoader
    workers exist or the processes do not read as a start does (at a cap, or from the disk
    without a busy core)."""
    if not record.procs or record.loader is not None:
        return False
    if any(p.role == "worker" for p in record.procs):
        return True
    return start_state(record) not in (StartState.CAPPED, StartState.READING)
