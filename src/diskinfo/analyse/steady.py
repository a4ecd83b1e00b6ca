"""The data-wait share held steady near a threshold (docs/verdicts.md, "Near a threshold").

One interval's data-wait share is noisy: under a neighbour's load it moves between 4% and
22% from one 2 s interval to the next, across XProf's 5% and 20% lines. The verdict judges
the share over a window of the loop's last SHARE_WINDOW intervals (their data-wait over their
loop time), and holds its severity with a band under each line: the window's share takes a
severity up as soon as it reaches that severity's line (5%, 20%), and lets it down only once
it falls SHARE_BAND under the line (under 4%, under 16%). A share that hovers around a line
keeps one verdict and is said as borderline with its range ("moderately input-bound, 4-22%
of step time"). Both figures are here, one place; they were chosen on the captured runs of
benchmarks/verdicts.py (benchmarks/results/verdicts.md, "The share window").
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

from diskinfo import thresholds as t
from diskinfo.analyse.signals import loop_running, severity_of
from diskinfo.record import IntervalRecord

# intervals of the window; chosen on the captured runs of benchmarks/verdicts.py (`--rescore`
# per window: benchmarks/results/verdicts.md)
SHARE_WINDOW = 4
SHARE_BAND = 0.4  # a held severity goes down once the share is this far (relative) under its line
_LINES = {"moderate": t.MODERATELY_INPUT_BOUND, "high": t.HIGHLY_INPUT_BOUND}
_LEVELS = ("none", "moderate", "high")


@dataclass(frozen=True)
class SteadyShare:
    """The share the verdict judges by, over the window."""

    share: float  # the window's data-wait over its loop time
    low: float  # the lowest and highest interval's share in the window
    high: float
    severity: str  # the held severity ("none", "moderate", "high")
    seconds: float  # the window's length

    @property
    def borderline(self) -> bool:
        """The window's intervals lie on both sides of a severity line."""
        return severity_of(self.low) != severity_of(self.high)


class ShareWindow:
    """The loop's last intervals and the held severity; emptied when the loop stops."""

    def __init__(self, size: int = SHARE_WINDOW, band: float = SHARE_BAND) -> None:
        self.size = max(1, size)
        self.band = band
        self._window: collections.deque[tuple[float, float, float]] = collections.deque(
            maxlen=self.size
        )  # (wait_s, loop_s, elapsed_s) per interval
        self._held: str | None = None

    def push(self, record: IntervalRecord) -> SteadyShare | None:
        loader = record.loader
        if loader is None or not loop_running(loader, record.elapsed_s):
            self._window.clear()
            self._held = None
            return None
        self._window.append((loader.wait_s, loader.wait_s + loader.step_s, record.elapsed_s))
        shares = [w / lp for w, lp, _ in self._window if lp > 0]
        loop = sum(lp for _, lp, _ in self._window)
        share = sum(w for w, _, _ in self._window) / loop if loop > 0 else 0.0
        low, high = (min(shares), max(shares)) if shares else (share, share)
        level = severity_of(share)
        held = self._held
        while held is not None and _LEVELS.index(level) < _LEVELS.index(held):
            if share >= _LINES[held] * (1 - self.band):  # within the band: held
                level = held
                break
            held = _LEVELS[_LEVELS.index(held) - 1]
        self._held = level
        seconds = sum(e for _, _, e in self._window)
        return SteadyShare(share, low, high, level, seconds)


def held_until(severity: str, band: float = SHARE_BAND) -> float:
    """The share under which a held severity goes down."""
    return _LINES[severity] * (1 - band) if severity in _LINES else 0.0


def share_words(steady: SteadyShare | None, share: float) -> str:
    """The data-wait share in the words of XProf's scale, borderline with its range."""
    label = {"high": "highly input-bound", "moderate": "moderately input-bound"}
    if steady is not None and steady.borderline:
        word = label.get(steady.severity, "not input-bound")
        return (
            f"{word}, {steady.low * 100:.0f}-{steady.high * 100:.0f}% of step time "
            f"(borderline: {t.pct(steady.share, t.MODERATELY_INPUT_BOUND)} over the last "
            f"{steady.seconds:.0f} s)"
        )
    severity = steady.severity if steady is not None else severity_of(share)
    if severity in label:
        waits = t.pct(share, t.HIGHLY_INPUT_BOUND)
        return f"{label[severity]}: the loop waits for data {waits} of step time"
    return f"the loop waits for data only {t.pct(share, t.MODERATELY_INPUT_BOUND)} of step time"
