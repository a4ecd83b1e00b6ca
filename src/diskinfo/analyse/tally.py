"""Time spent in each verdict over a run, and the fix to try first: one rule for `diskinfo
report` and for the monitor's closing `[Run]` line, so both name the same fix for one run."""

from __future__ import annotations

from collections import defaultdict

from diskinfo.analyse.fixes import longer_fix, wrap_fix
from diskinfo.record import NO_VERDICT, IntervalRecord, Verdict, VerdictName

# a measured run of at most this many intervals, none judged (unknown, then idle once the
# command ended), ended before it could be judged: the loop's first interval is start-up
TOO_SHORT_INTERVALS = 3


def verdict_of(record: IntervalRecord) -> str:
    return record.verdict.verdict if record.verdict is not None else NO_VERDICT


class VerdictTally:
    """Seconds per held verdict, and per (verdict, its first fix)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._fixes: dict[tuple[str, str], float] = defaultdict(float)
        self.total_s = 0.0
        # a training command ran, but nothing measured its loop: neither loop figures nor a GPU
        self._trained = self._measured = False
        self._not_iterated = 0
        self._intervals = 0
        self._interval_s = 0.0  # the longest interval seen: the monitor's own

    def add(self, record: IntervalRecord, v: Verdict | None) -> None:
        """`v`: the record's verdict (the analyser counts a record before it holds one)."""
        self.total_s += max(record.elapsed_s, 0.0)
        self._intervals += 1
        self._interval_s = max(self._interval_s, record.elapsed_s)
        self.seconds[v.verdict if v is not None else NO_VERDICT] += record.elapsed_s
        if v is not None and v.fixes:
            self._fixes[(v.verdict, v.fixes[0])] += record.elapsed_s
        self._trained = self._trained or bool(record.procs)
        self._measured = self._measured or record.loader is not None or bool(record.gpus)
        self._not_iterated = max(self._not_iterated, record.wrapped_not_iterated)

    def shares(self) -> dict[str, float]:
        """Share of the run's time per verdict, largest first."""
        total = self.total_s
        ordered = sorted(self.seconds.items(), key=lambda kv: (-kv[1], kv[0]))
        return {v: t / total if total else 0.0 for v, t in ordered}

    def top_fix(self) -> tuple[str, str] | None:
        """(verdict, fix): the fix held longest, an input-bound one first (that is what
        costs GPU time). A run too short for the monitor's "wrap it" hint, with a training
        command that nothing measured, gets that hint here: after the run nothing else
        could be judged; a measured run that ended before its loop's second interval is told
        to run longer. None when there is no fix to name."""
        inputs = {k: t for k, t in self._fixes.items() if VerdictName.is_input_bound(k[0])}
        pool = inputs or self._fixes
        if pool:
            return max(pool, key=lambda k: (pool[k], k))
        if self._trained and not self._measured:
            return VerdictName.UNKNOWN, wrap_fix(self._not_iterated)
        if (
            self._measured
            and VerdictName.UNKNOWN in self.seconds
            # idle: after the command ended
            and set(self.seconds) <= {VerdictName.UNKNOWN, VerdictName.IDLE}
            and self._intervals <= TOO_SHORT_INTERVALS
        ):
            return VerdictName.UNKNOWN, longer_fix(self._interval_s)
        return None
