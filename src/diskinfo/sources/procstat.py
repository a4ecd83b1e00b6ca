"""/proc/stat's aggregate `cpu` line: the host's CPU time by state, in clock ticks."""

from __future__ import annotations

from typing import NamedTuple


class CpuTimes(NamedTuple):
    """Aggregate `cpu` line of /proc/stat, in clock ticks (guest time is inside user/nice).
    A tuple, not a dataclass: read every sample, and `astuple` deep-copies."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        return sum(self)


def parse_proc_stat(text: str) -> tuple[CpuTimes, int]:
    """(aggregate CPU times, number of per-CPU lines). ValueError if there is no `cpu` line.

    The kernel writes the aggregate `cpu` line first and the `cpuN` lines right after it;
    only the first line is split (the rest, with an `intr` line of thousands of numbers on a
    large host, is only counted in C: every other line starting with "cpu" is a CPU's)."""
    end = text.find("\n")
    line = text[: end if end >= 0 else len(text)]
    parts = line.split()
    if not parts or parts[0] != "cpu":
        raise ValueError("no cpu line in /proc/stat")
    if len(parts) < 5:
        raise ValueError(f"short cpu line in /proc/stat: {line!r}")
    try:
        values = list(map(int, parts[1:9]))
    except ValueError:
        raise ValueError(f"bad cpu line in /proc/stat: {line!r}") from None
    values += [0] * (8 - len(values))  # old kernels lack steal
    return CpuTimes(*values), text.count("\ncpu")


def cpu_percent(prev: CpuTimes, cur: CpuTimes) -> tuple[float, float]:
    """(busy %, iowait %) of all cores between two readings; (0, 0) when counters did not move
    forward (a counter that went down is treated as no time, never as negative time)."""
    deltas = [max(0, c - p) for p, c in zip(prev, cur, strict=True)]
    total = sum(deltas)
    if total <= 0:
        return 0.0, 0.0
    idle, iowait = deltas[3], deltas[4]
    busy = total - idle - iowait
    return min(100.0, 100.0 * busy / total), min(100.0, 100.0 * iowait / total)
