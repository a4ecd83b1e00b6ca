"""Contention: the host's other work takes the CPU this job could use.

A cause of its own, decided before the loader's causes (docs/verdicts.md, "Which
input-bound?"): a neighbour's load starves the loop in stretches, and the data-wait share
alone then swings between verdicts as that load shifts.
"""

from __future__ import annotations

from diskinfo import thresholds as t
from diskinfo.analyse.signals import Signals, run_queue_wait

# how the contention's words begin (a secondary finding is found by them: "also: ...")
CONTENDED = "the host's other work takes the CPU"


def contention(s: Signals, floor: float = t.CONTENTION_WAIT_SHARE) -> list[str]:
    """Why the host's other work is the limit, [] when it is not: the host's CPU saturated,
    this container below its own cores, and the training processes waiting for a core at
    least `floor` of the time they want one. Another container's load moves the loop between
    starved stretches (little data-wait: the step waits for a core too) and fed ones; this
    names that load in both, where the data-wait share alone flips between two verdicts."""
    h = s.host
    waited = run_queue_wait(s.procs)
    if h is None or waited is None or h.cpu_busy < t.CPU_SATURATED_PCT:
        return []
    share, wanted = waited
    cores = s.cpu_cores or float(h.cpu_count or 0)
    if s.cpu_scope == "container":
        own = h.cgroup_cpu_cores or 0.0
        own_busy = s.cpu_busy or 0.0
    else:  # the host's figures only: the training processes' own CPU is this job's
        own = (wanted * (1 - share)) / 100.0
        own_busy = 100.0 * own / cores if cores else 0.0
    if share < floor or own_busy >= t.CPU_SATURATED_PCT:
        return []
    return [
        f"{CONTENDED}: the training processes waited for a core "
        f"{t.pct(share, floor)} of the time they wanted one ({wanted / 100:.1f} cores wanted, "
        f"{wanted * (1 - share) / 100:.1f} got) while the host is {h.cpu_busy:.0f}% busy of "
        f"{h.cpu_count} cores and this job uses {own:.1f} of its {cores:g}"
    ]
