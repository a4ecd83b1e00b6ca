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

from diskinfo.analyse.fixes import fixes_for
from diskinfo.analyse.signals import Signals
from diskinfo.record import Cause, VerdictName

# the causes of a disk limit at its capacity: the loop's reads run at that limit's rate
AT_CAPACITY = (Cause.CGROUP_CAP, Cause.DEVICE_LIMIT)
# the prefix of a secondary finding, in the summary and in the evidence
ALSO = "also: "


def binding(
    found: tuple[Cause, list[str]], contended: list[str]
) -> tuple[tuple[Cause, list[str]], list[str]]:
    """(the binding limit's (cause, why), the other limits' words) of an input-bound
    interval: `found` is the first rule that holds by `cause_of`, `contended` the contention
    words ([] when the host's other work does not take the CPU). A cause that explains
    nothing (`cpu-unexplained`: the contention is its explanation) is no finding."""
    if found[0] in AT_CAPACITY or not contended:
        return found, contended
    others = found[1] if found[0] != Cause.CPU_UNEXPLAINED else []
    return (Cause.CPU_CONTENTION, contended), others


def also(findings: list[str]) -> list[str]:
    """The secondary findings as lines of their own ("also: ...")."""
    return [f"{ALSO}{f}" for f in findings]


def ordered_fixes(cause: Cause, second: Cause | None, s: Signals) -> list[str]:
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
