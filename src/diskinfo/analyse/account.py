"""The held verdict's account, kept where the held verdict is decided, so that the text log
only writes it: whether it changed with an interval and from what (`[Verdict] ... (was X)`),
whether the interval decided the held verdict itself and how long it waited for data (what
a `[Summary]` sums over its period), and the run so far (the `[Run]` line, by VerdictTally:
one rule with `diskinfo report`)."""

from __future__ import annotations

from typing import NamedTuple

from diskinfo.analyse.tally import VerdictTally
from diskinfo.record import IntervalRecord, Verdict


class HeldAccount(NamedTuple):
    """What the analyser knows of the held verdict across intervals, as of one interval: the
    facts the text log tells in words, so that it writes and does not decide. Set by the
    Diagnoser on each record it judges (`IntervalRecord.account`, also where the analysis
    failed: its interval counts in the run); never part of the JSONL. (A tuple: one is made
    per interval, and a tuple costs a fraction of a frozen dataclass.)"""

    changed: bool  # the held verdict or its cause differs from the verdict handed out before
    was: str | None  # that verdict (None: this is the first)
    was_cause: str  # its cause
    agrees: bool  # this interval's own decision is the held verdict
    waited_s: float | None  # this interval's data-wait share x its seconds (None: not measured)
    # the run so far: the seconds in each verdict and the fix to try first (the analyser's
    # own tally, one rule with `diskinfo report`; it goes on counting after this interval)
    run: VerdictTally


class Accounts:
    """One per run: the verdict handed out last, and the run's tally."""

    def __init__(self) -> None:
        self.run = VerdictTally()
        self._held: tuple[str, str] | None = None  # (verdict, cause) last handed out

    def add(self, record: IntervalRecord, verdict: Verdict) -> HeldAccount:
        """This interval's account. A change is against the verdict handed out before, not
        the Hysteresis's own flag: a change made in an interval whose analysis then failed
        is said with the next verdict, never lost."""
        self.run.add(record, verdict)
        was = self._held
        self._held = (verdict.verdict, verdict.cause)
        share = verdict.input_share
        return HeldAccount(
            changed=was != self._held,
            was=None if was is None else was[0],
            was_cause="" if was is None else was[1],
            agrees=(verdict.interval_verdict or verdict.verdict) == verdict.verdict,
            waited_s=None if share is None else share * record.elapsed_s,
            run=self.run,
        )

    def failed(self, record: IntervalRecord) -> HeldAccount:
        """An interval the analysis failed on: counted in the run, as "no verdict"; nothing
        was handed out, so a change it made is said with the next verdict."""
        self.run.add(record, None)
        was = self._held
        return HeldAccount(
            changed=False,
            was=None if was is None else was[0],
            was_cause="" if was is None else was[1],
            agrees=False,
            waited_s=None,
            run=self.run,
        )
