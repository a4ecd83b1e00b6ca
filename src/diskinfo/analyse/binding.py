"""The binding limit: of the limits that apply in one interval, the one the loop waits on.

Several limits can hold at once on a shared node: a cgroup read cap, the device's own
saturation, the host's other work taking the CPU, the container's own CPU, too few workers.
Only one of them sets the loop's pace; the verdict names that one and lists the others as
secondary findings ("also: ..."), so that the headline does not alternate between them as
their figures move (docs/verdicts.md, "The binding limit").

The rule: a resource running at its capacity for the work the loop waits on binds. Reads at
(or within CAP_NEAR_SHARE of) a cgroup cap, or at the device's measured limit, run at that
limit's rate whatever CPU the loop gets: more CPU would only queue more reads for the same
rate, so a disk limit at capacity binds over any CPU limit. Without one, the host's other work
taking the CPU binds over the container's own CPU causes (those say what the loop would do
with the cores it cannot get). The limits that do not bind stay in the words, never as the
headline.
"""

from __future__ import annotations

from diskinfo import thresholds as t
from diskinfo.analyse.fix_ids import FixId
from diskinfo.analyse.fixes import fixes_for
from diskinfo.analyse.signals import Signals
from diskinfo.record import Cause, IntervalRecord, VerdictName

# the causes of a disk limit at its capacity: the loop's reads run at that limit's rate
AT_CAPACITY = (Cause.CGROUP_CAP, Cause.DEVICE_LIMIT)
# the prefix of a secondary finding, in the summary and in the evidence
ALSO = "also: "
# this container's share of a device's reads from which the device's limit is its own
OWN_SHARE = 0.5


def own_share(s: Signals, record: IntervalRecord) -> float | None:
    """This container's share of the busiest device's reads, from its cgroup's own I/O
    (None: no cgroup figures for the device, or the device reads nothing)."""
    d = s.disk
    own = [c for c in record.cgroup_io if d is not None and c.device == d.device]
    if not own or d is None or d.rmb_s <= 0:
        return None
    return min(1.0, sum(c.read_bytes_s for c in own) / 2**20 / d.rmb_s)


def binding(
    found: tuple[Cause, list[str]],
    contended: list[str],
    own_share: float | None = None,
    capped: bool = False,
) -> tuple[tuple[Cause, list[str]], list[str]]:
    """(the binding limit's (cause, why), the other limits' words) of an input-bound
    interval: `found` is the first rule that holds by `cause_of`, `contended` the contention
    words ([] when the host's other work does not take the CPU), `own_share` this
    container's share of the device's reads (None: not known). The device at its limit
    binds only where this container's reads are most of what runs it there: a device a
    neighbour saturates slows the loop's few reads, but the CPU the neighbour takes is what
    the loop waits on. A cause that explains nothing (`cpu-unexplained`: the contention is its
    explanation) is no finding. `capped`: the reads sit at the container's cap, which then
    binds whichever rule comes first (an epoch's start read through the cap)."""
    mine = found[0] != Cause.DEVICE_LIMIT or own_share is None or own_share >= OWN_SHARE
    if (found[0] in AT_CAPACITY and mine) or capped or not contended:
        return found, contended
    others = found[1] if found[0] != Cause.CPU_UNEXPLAINED else []
    return (Cause.CPU_CONTENTION, contended), others


def busy_elsewhere(s: Signals) -> str:
    """The watched device busy with another's reads while this container reads none from it
    (its cgroup's own I/O): a neighbour on the same disk, said as a finding, never the
    binding limit ("" when not)."""
    d = s.disk
    if s.own_reads is not False or d is None or not s.reading:
        return ""
    bw = s.bandwidth.seq_read_mb_s if s.bandwidth is not None else 0.0
    if d.util < t.DISK_BUSY_UTIL_PCT and not (bw > 0 and d.rmb_s >= t.NEAR_BANDWIDTH * bw):
        return ""
    return (
        f"{d.device} is busy with other work ({d.rmb_s:.0f} MB/s, {d.r_s:.0f} reads/s, %util "
        f"{d.util:.0f}%) while this container reads nothing from it: a neighbour on the same "
        "disk, not this loop's limit"
    )


def also(findings: list[str]) -> list[str]:
    """The secondary findings as lines of their own ("also: ...")."""
    return [f"{ALSO}{f}" for f in findings]


def ordered_fixes(cause: Cause, second: Cause | None, s: Signals) -> list[tuple[FixId, str]]:
    """The binding limit's fixes, then the secondary limit's first; a CPU cause beside binding
    contention adds none (more workers would queue for the same cores). A step slowed by the
    host's other work (its processes wait for a core) is bound by that work: the CPU
    isolation fix comes first."""
    fixes = fixes_for(cause, s)
    if second is None:
        return fixes
    extra = [f for f in fixes_for(second, s)[:1] if f not in fixes]
    if cause == Cause.STEP:
        return extra + fixes
    if second == Cause.CPU_CONTENTION or second.verdict != VerdictName.INPUT_CPU:
        return fixes + extra
    return fixes
