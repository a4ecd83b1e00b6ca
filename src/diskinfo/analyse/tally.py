"""Time spent in each verdict over a run, and the fix to try first: one rule for `diskinfo
report` and for the monitor's closing `[Run]` line, so both name the same fix for one run."""

from __future__ import annotations

from collections import defaultdict

from diskinfo.record import IntervalRecord, Verdict

NO_VERDICT = "no verdict"  # intervals recorded without a verdict (analysis failed or off)


def verdict_of(record: IntervalRecord) -> str:
    return record.verdict.verdict if record.verdict is not None else NO_VERDICT


class VerdictTally:
    """Seconds per held verdict, and per (verdict, its first fix)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._fixes: dict[tuple[str, str], float] = defaultdict(float)
        self.total_s = 0.0

    def add(self, record: IntervalRecord) -> None:
        v: Verdict | None = record.verdict
        self.total_s += max(record.elapsed_s, 0.0)
        self.seconds[verdict_of(record)] += record.elapsed_s
        if v is not None and v.fixes:
            self._fixes[(v.verdict, v.fixes[0])] += record.elapsed_s

    def shares(self) -> dict[str, float]:
        """Share of the run's time per verdict, largest first."""
        total = self.total_s
        ordered = sorted(self.seconds.items(), key=lambda kv: (-kv[1], kv[0]))
        return {v: t / total if total else 0.0 for v, t in ordered}

    def top_fix(self) -> tuple[str, str] | None:
        """(verdict, fix): the fix held longest, an input-bound one first (that is what
        costs GPU time); None when no verdict named a fix."""
        inputs = {k: t for k, t in self._fixes.items() if k[0].startswith("input-bound")}
        pool = inputs or self._fixes
        return max(pool, key=lambda k: (pool[k], k)) if pool else None
