"""/proc/PID/schedstat: three numbers, the time on a CPU (ns), the time runnable but waiting
on a run queue (ns) and the timeslices run (Documentation/scheduler/sched-stats.rst). The wait
is what another container's load takes from a DataLoader worker (`cpu_wait_percent`)."""

from __future__ import annotations

from diskinfo.sources import ParseError


def parse_run_wait_s(text: str) -> float:
    """Seconds waited on a run queue (the second field)."""
    fields = text.split()
    if len(fields) < 2 or not fields[1].isdigit():
        raise ParseError(f"schedstat: expected three numbers, got {text.strip()[:40]!r}")
    return int(fields[1]) / 1e9


def read(pid: int) -> str:
    with open(f"/proc/{pid}/schedstat", "rb") as f:
        return f.read().decode("ascii", "replace")


def run_wait_s(pid: int) -> float:
    """Seconds `pid` has waited on a run queue; 0 where the kernel has no schedstat or the
    process is gone."""
    try:
        return parse_run_wait_s(read(pid))
    except (OSError, ParseError):
        return 0.0
