"""The monitor's analyser: `decide` per interval, plus what needs memory across intervals.

- The held verdict (hysteresis): the verdict a user reads (with its cause) changes only
  when another one has been decided in `hold` intervals in a row (DISKINFO_VERDICT_HOLD,
  default 2) and at least as often as the held one over the last 2 x `hold` intervals. The
  first verdict, and leaving `unknown` for a verdict, are taken at once. One odd interval
  never flips it; a real change shows within `hold` intervals.
- How long the training command has run without loop figures (the "wrap it" hint waits;
  with a GPU, a loader wrapped but never iterated is a once-only note).
- Whether the loop has yet run for most of an interval: the interval it starts in is mostly
  the command's start-up (importing torch reads hundreds of library files from the disk the
  data may share), so it is `unknown (starting)`, never judged on reads that were not data.
- Once-only notes (no measured bandwidth for a device) and sustained-condition warnings.
- The held verdict's account (analyse/account.py): whether it changed since the verdict
  handed out before and from what, and the running figures the log's summary and closing
  lines say, set on each record judged.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Callable, Hashable, Mapping

from diskinfo import thresholds as t
from diskinfo.analyse.account import Accounts
from diskinfo.analyse.baseline import DeviceBaseline
from diskinfo.analyse.binding import ALSO
from diskinfo.analyse.contention import CONTENDED
from diskinfo.analyse.fixes import wrap_fix
from diskinfo.analyse.job import in_job
from diskinfo.analyse.signals import busiest_device, watched
from diskinfo.analyse.start import loop_runs_unseen
from diskinfo.analyse.steady import SHARE_BAND, SHARE_WINDOW, ShareWindow
from diskinfo.analyse.verdict import decide, wrapped_elsewhere
from diskinfo.record import Cause, IntervalRecord, Verdict, VerdictName


class Hysteresis:
    """Holds one decision against interval-to-interval noise. A decision is a cause, which
    names its verdict: the cause is held with its verdict, so a change of cause within one
    verdict is held like a change of verdict. The advice is held the same way (a decision is
    then the kinds of the fixes: `advice_kind`)."""

    def __init__(self, hold: int) -> None:
        self.hold = max(1, hold)
        self.recent: collections.deque[Hashable] = collections.deque(maxlen=2 * self.hold)
        self.held: Hashable | None = None
        self.held_s = 0.0

    def push(self, decided: Hashable, elapsed: float) -> bool:
        """Add one interval's decision; True when the held verdict or its cause changed."""
        self.recent.append(decided)
        last = list(self.recent)[-self.hold :]
        unknown = VerdictName.UNKNOWN
        verdict = getattr(self.held, "verdict", None)
        # a training command that starts is news: its start is said at once, from nothing
        # judged (unknown) or from idle
        begins = decided == Cause.STARTING and verdict in (unknown, VerdictName.IDLE)
        if (
            self.held is None
            or (verdict == unknown and getattr(decided, "verdict", None) != unknown)
            or (begins and self.held != decided)
        ):
            # nothing to defend: the first verdict, or leaving "unknown" for a verdict, is
            # taken at once; from one unknown cause to another is held like any change (the
            # last interval of a run, its command gone, is no new state to announce)
            self.held, self.held_s = decided, elapsed
            return True
        steady = len(last) == self.hold and all(v == decided for v in last)
        if (
            decided != self.held
            and steady
            and self.recent.count(decided) >= self.recent.count(self.held)
        ):
            self.held, self.held_s = decided, elapsed
            return True
        self.held_s += elapsed
        return False


_FIGURES = re.compile(r"\d+(?:\.\d+)?")


def advice_kind(fixes: list[str]) -> tuple[str, ...]:
    """What each fix advises, without its figures: the words before its colon, numbers
    left out ("num_workers # -> #", "more workers will not help")."""
    return tuple(_FIGURES.sub("#", f.split(":", 1)[0]) for f in fixes)


def starting(own: Verdict, summary: str) -> Verdict:
    """`unknown (starting)` for an interval that holds a start, not the loop's steady state:
    said with what started, given no fix."""
    return own.but(
        verdict=VerdictName.UNKNOWN,
        cause=Cause.STARTING,
        summary=summary,
        fixes=[],
        fix_ids=[],
        severity="",
        interval_verdict=VerdictName.UNKNOWN,
        interval_cause=Cause.STARTING,
    )


class Diagnoser:
    def __init__(
        self,
        baselines: Mapping[str, DeviceBaseline] | Callable[[], Mapping[str, DeviceBaseline]],
        hold: int | None = None,
        share_window: int = SHARE_WINDOW,
        share_band: float = SHARE_BAND,
        peers: Callable[[], list[IntervalRecord]] | None = None,
    ) -> None:
        self._baselines = baselines
        self._peers = peers  # the job's other nodes' latest records (sources/peer_logs.py)
        self._conditions: dict[str, float] = {}  # condition key -> seconds it has held
        self._hysteresis = Hysteresis(t.verdict_hold() if hold is None else hold)
        self._latest: dict[Cause, Verdict] = {}  # decision -> its latest interval's Verdict
        self._training_s = 0.0
        self._loop_seen = False  # has the loop's first interval been judged or said "starting"?
        self._noted: set[str] = set()
        # contention is held with two thresholds: a neighbour's load that ebbs for a moment
        # leaves the run-queue wait between them, and the cause stays
        self._contended = False
        self._share = ShareWindow(share_window, share_band)
        self._advice: Hysteresis | None = None  # the held cause's fixes, held by their kinds
        self._advised: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}  # fixes, ids
        self._loop_s = 0.0  # seconds the loop is known to run without figures (the wrap hint)
        self._accounts = Accounts()
        self._settings: tuple[object, ...] | None = None  # the loop's DataLoader settings
        self._change = ""  # the latest change of those settings, in words

    def _new_loop(self, record: IntervalRecord) -> bool:
        """A change of the loader's settings (num_workers 0 -> 2, pin_memory, ...) is a new
        loop, not noise: the hold, the share window and the held advice start over, so the
        verdict speaks of the loop that runs now (a held "num_workers=0" said beside a loop
        with 2 workers would be wrong). The interval of the change holds the old loop's end
        and the new one's start (its workers spawning): it is `unknown` (said, so the user
        sees the change was seen), held by nothing, counted in no window and given no fix (a
        fix from it was the [Run] line's first in the demo), and the next interval's decision
        is taken at once."""
        loader = record.loader
        if loader is None or loader.num_workers is None:
            return False
        settings = (
            loader.num_workers,
            loader.pin_memory,
            loader.persistent_workers,
            loader.prefetch_factor,
        )
        changed = self._settings is not None and settings != self._settings
        if changed:
            self._hysteresis = Hysteresis(self._hysteresis.hold)
            self._share = ShareWindow(self._share.size, self._share.band)
            self._advice = None
            names = ("num_workers", "pin_memory", "persistent_workers", "prefetch_factor")
            self._change = ", ".join(
                f"{name} {old} -> {new}"
                for name, old, new in zip(names, self._settings or (), settings, strict=True)
                if old != new
            )
        self._settings = settings
        return changed

    def _hold(self, key: str, condition: bool, elapsed: float) -> float:
        if condition:
            self._conditions[key] = self._conditions.get(key, 0.0) + elapsed
        else:
            self._conditions.pop(key, None)
        return self._conditions.get(key, 0.0)

    def _note_once(self, key: str, text: str, out: list[str]) -> None:
        if key not in self._noted:
            self._noted.add(key)
            out.append(text)

    def __call__(self, record: IntervalRecord) -> Verdict:
        """The record's verdict; the held verdict's account goes on the record, also when
        the analysis fails (the run's closing line counts that interval as "no verdict")."""
        try:
            verdict = self._judge(record)
        except Exception:
            record.account = self._accounts.failed(record)
            raise
        record.account = self._accounts.add(record, verdict)
        return verdict

    def _judge(self, record: IntervalRecord) -> Verdict:
        baselines = self._baselines() if callable(self._baselines) else self._baselines
        new_loop = self._new_loop(record)
        elapsed = record.elapsed_s
        # the training command's age: counted while its processes run, reset when they end
        self._training_s = self._training_s + elapsed if record.procs else 0.0
        floor = t.CONTENTION_LEAVE_SHARE if self._contended else t.CONTENTION_WAIT_SHARE
        self._loop_s = self._loop_s + elapsed if loop_runs_unseen(record) else 0.0
        own = decide(
            record,
            baselines,
            self._training_s if record.procs else None,
            floor,
            None if new_loop else self._share.push(record),
            self._loop_s,
        )
        self._contended = own.cause == Cause.CPU_CONTENTION or any(
            e.startswith(ALSO + CONTENDED) for e in own.evidence
        )
        if record.loader is not None and (record.loader.world_size or 0) > 1:
            own = in_job(record, own, self._peers() if self._peers is not None else None)
        own = self._loop_start(record, own)
        if new_loop:
            own = starting(
                own,
                f"the DataLoader's settings changed during this interval ({self._change}): it "
                "holds the old loop's end and the new one's start, judged from the next one",
            )
        cause = own.cause if isinstance(own.cause, Cause) else Cause(own.cause)
        self._latest[cause] = own
        if new_loop:  # said as it is; the hold begins with the next interval
            changed, held = True, own
        else:
            changed = self._hysteresis.push(cause, elapsed)
            held = self._latest[self._hysteresis.held or cause]  # type: ignore[index]
        held = self._held_advice(held, changed, elapsed)
        verdict = held.but(
            evidence=own.evidence,  # the figures are always this interval's
            severity=own.severity,
            input_share=own.input_share,
            interval_verdict=own.verdict,
            interval_cause=own.cause,
            held_s=self._hysteresis.held_s,
            warnings=[],
            notes=[],
        )
        if changed:
            verdict.held_s = elapsed
        disk = busiest_device(record)
        if (  # the disk's measured bandwidth matters only where the reads are the suspect
            VerdictName.is_input_bound(own.verdict)
            and own.verdict != VerdictName.INPUT_CPU
            and disk is not None
            and disk.device not in baselines
        ):
            where = disk.paths[0] if disk.paths else "PATH"
            self._note_once(
                f"nobase:{disk.device}",
                f"no measured bandwidth for {disk.device}: run `diskinfo bench {where}`",
                verdict.notes,
            )
        if (  # the verdict without a GPU says it; with one, the GPU decides: a note
            record.wrapped_not_iterated
            and self._training_s >= t.WRAP_HINT_AFTER_S
            and own.cause != Cause.NOT_WRAPPED
        ):
            n = record.wrapped_not_iterated
            seen = wrapped_elsewhere(n, f" after {self._training_s:.0f} s")
            self._note_once("wrapped-not-iterated", f"{seen}: {wrap_fix(n)}", verdict.notes)
        self._warnings(record, baselines, verdict)
        return verdict

    def _held_advice(self, held: Verdict, changed: bool, elapsed: float) -> Verdict:
        """The held verdict with its fixes held like the verdict: a fix of another kind
        (\"num_workers 0 -> 2\" for \"more workers will not help\") replaces the held one only
        as a verdict would; the figures in the words are the latest of the held kind."""
        if changed or self._advice is None:
            self._advice, self._advised = Hysteresis(self._hysteresis.hold), {}
        kinds = advice_kind(held.fixes)
        self._advised[kinds] = held
        self._advice.push(kinds, elapsed)
        advised = self._advised.get(self._advice.held, held)  # type: ignore[arg-type]
        return held.but(
            fixes=advised.fixes,
            fix_ids=advised.fix_ids,
            workers_target=advised.workers_target,
        )

    def _loop_start(self, record: IntervalRecord, own: Verdict) -> Verdict:
        """`unknown (starting)` for the loop's first interval when the loop ran for less than
        LOOP_START_COVER of it; every later interval is judged (however the wrapper's
        publishing splits it). Not when workers died: their fix (a larger /dev/shm) is no
        start-up artifact. Reset when the training command ends."""
        loader = record.loader
        if not record.procs and loader is None:
            self._loop_seen = False
            return own
        if loader is None or self._loop_seen or loader.worker_errors:
            return own  # a worker death is a fact, whatever the share of the interval
        self._loop_seen = True
        ran = (loader.wait_s + loader.step_s) / max(loader.processes, 1)
        cover = ran / record.elapsed_s if record.elapsed_s > 0 else 1.0
        if cover >= t.LOOP_START_COVER:
            return own
        return starting(
            own,
            f"the training loop began during this interval (it ran {cover:.0%} of it): "
            "judged from the next one, as start-up reads are not the data's",
        )

    def _warnings(
        self, record: IntervalRecord, baselines: Mapping[str, DeviceBaseline], verdict: Verdict
    ) -> None:
        elapsed = record.elapsed_s
        input_bound = VerdictName.is_input_bound(verdict.interval_verdict)
        for d in watched(record.devices):
            await_ms = max(d.r_await, d.w_await)
            held = self._hold(f"await:{d.device}", await_ms > t.AWAIT_WARN_MS, elapsed)
            if held >= t.AWAIT_WARN_S:
                verdict.warnings.append(
                    f"{d.device}: await {await_ms:.0f} ms above {t.AWAIT_WARN_MS:.0f} ms for "
                    f"{held / 60:.1f} min"
                )
            held = self._hold(f"util:{d.device}", d.util > t.UTIL_WARN_PCT, elapsed)
            if held >= t.UTIL_WARN_S:
                verdict.warnings.append(
                    f"{d.device}: %util above {t.UTIL_WARN_PCT:.0f}% for {held:.0f} s (on NVMe "
                    "and RAID %util saturates early: check await and MB/s against the bandwidth)"
                )
            base = baselines.get(d.device)
            low = (
                input_bound
                and base is not None
                and base.seq_read_mb_s > 0
                and d.rmb_s < t.LOW_BANDWIDTH * base.seq_read_mb_s
            )
            held = self._hold(f"lowbw:{d.device}", low, elapsed)
            if low and held >= t.LOW_BANDWIDTH_WARN_S:
                assert base is not None
                verdict.warnings.append(
                    f"{d.device}: input-bound while reading {d.rmb_s:.1f} MB/s, under "
                    f"{t.LOW_BANDWIDTH * 100:.0f}% of its measured {base.seq_read_mb_s:.0f} "
                    f"MB/s for {held:.0f} s: the access pattern, not the device, is the limit"
                )
