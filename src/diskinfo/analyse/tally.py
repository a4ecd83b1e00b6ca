"""Time spent in each verdict over a run, and the fix to try first: one rule for `diskinfo
report` and for the monitor's closing `[Run]` line, so both name the same fix for one run."""

from __future__ import annotations

from collections import defaultdict

from diskinfo.analyse.fix_ids import WORKERS_FIXES
from diskinfo.analyse.fixes import cap_words, longer_fix, wrap_fix
from diskinfo.analyse.signals import read_caps
from diskinfo.analyse.start import StartState, start_state
from diskinfo.analyse.workers import workers_target_in_words
from diskinfo.record import NO_VERDICT, IntervalRecord, Verdict, VerdictName

# a measured run of at most this many intervals, none judged (unknown, then idle once the
# command ended), ended before it could be judged: the loop's first interval is start-up
TOO_SHORT_INTERVALS = 3
# a start (the command's first interval to the loop's first batch) this long is said, with
# what it spent its time on, in the [Run] line and the report
START_LONG_S = 30.0


def verdict_of(record: IntervalRecord) -> str:
    return record.verdict.verdict if record.verdict is not None else NO_VERDICT


class StartTally:
    """The training command's start: seconds from its first interval to the loop's first
    batch, and how much of it went to each state (analyse/start.py). Only the first start
    of a run counts; a command without loop figures has no end to its start."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.states: dict[StartState, float] = defaultdict(float)
        self.cap = ""  # the read cap the start ran at, in words
        self.ended = False  # the loop's first batch came

    def add(self, record: IntervalRecord) -> None:
        if self.ended or not record.procs:
            return
        if record.loader is not None and record.loader.batches:
            self.ended = True
            return
        state = start_state(record)
        self.seconds += record.elapsed_s
        self.states[state] += record.elapsed_s
        if state == StartState.CAPPED:
            capped = next((c for c in record.cgroup_io if read_caps(c)), None)
            self.cap = cap_words(capped) if capped is not None else self.cap

    def words(self) -> str | None:
        """The start in words ("start 95 s, 80 s of it reading at the container's read cap
        (8.0 MB/s)") for a start of START_LONG_S or more that ended in a batch, else None."""
        if not self.ended or self.seconds < START_LONG_S or not self.states:
            return None
        state, spent = max(self.states.items(), key=lambda kv: kv[1])
        cap = f" ({self.cap})" if state == StartState.CAPPED and self.cap else ""
        return f"start {self.seconds:.0f} s, {spent:.0f} s of it {state.value}{cap}"


class VerdictTally:
    """Seconds per held verdict, and per (verdict, its first fix's id): a fix counts as one
    however its words change with the figures; the words named are its latest."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self._fixes: dict[tuple[str, str], float] = defaultdict(float)
        self._words: dict[tuple[str, str], str] = {}  # each fix's latest words
        self._targets: dict[tuple[str, str], int | None] = {}  # each fix's latest num_workers
        # the DataLoader num_workers each fix was advised under (where a stretch of it began:
        # a held verdict outlasts the change that ends it by an interval or two), and the
        # run's last; only a num_workers fix is ever found applied, so that is all it takes
        self._workers: dict[tuple[str, str], set[int]] = defaultdict(set)
        self._last_workers: int | None = None
        self._stretch: tuple[str, str] | None = None
        self._placed = False  # the stretch's num_workers is noted
        self.total_s = 0.0
        # a training command ran, but nothing measured its loop: neither loop figures nor a GPU
        self._trained = self._measured = False
        self._not_iterated = 0
        self._intervals = 0
        self._interval_s = 0.0  # the longest interval seen: the monitor's own
        self.start = StartTally()

    def add(self, record: IntervalRecord, v: Verdict | None) -> None:
        """`v`: the record's verdict (the analyser counts a record before it holds one)."""
        self.total_s += max(record.elapsed_s, 0.0)
        self._intervals += 1
        self._interval_s = max(self._interval_s, record.elapsed_s)
        self.seconds[v.verdict if v is not None else NO_VERDICT] += record.elapsed_s
        workers = record.loader.num_workers if record.loader is not None else None
        if workers is not None:
            self._last_workers = workers
        key = (v.verdict, _first_id(v)) if v is not None and v.fixes else None
        if key != self._stretch:
            self._stretch, self._placed = key, False
        if key is not None:
            self._fixes[key] += record.elapsed_s
            self._words[key] = v.fixes[0]  # type: ignore[union-attr]
            self._targets[key] = _target(v, key)  # type: ignore[arg-type]
            if workers is not None and not self._placed:
                self._workers[key].add(workers)
                self._placed = True
        self._trained = self._trained or bool(record.procs)
        self._measured = self._measured or record.loader is not None or bool(record.gpus)
        self._not_iterated = max(self._not_iterated, record.wrapped_not_iterated)
        self.start.add(record)

    def shares(self) -> dict[str, float]:
        """Share of the run's time per verdict, largest first."""
        total = self.total_s
        ordered = sorted(self.seconds.items(), key=lambda kv: (-kv[1], kv[0]))
        return {v: t / total if total else 0.0 for v, t in ordered}

    def top_fix(self) -> tuple[str, str] | None:
        """(verdict, fix): the fix held longest, an input-bound one first (that is what
        costs GPU time). A num_workers fix the run then applied is left out: advised only
        at other num_workers than the run's last DataLoader, which has at least the workers
        it named (the demo applies num_workers 0 -> 2 and ends compute-bound). A validation
        loader with fewer workers, ending the run, does not count as applying it. A run too short
        for the monitor's "wrap it" hint, with a training command that nothing measured,
        gets that hint here: after the run nothing else could be judged; a measured run
        that ended before its loop's second interval is told to run longer. None when there
        is no fix to name."""
        current = {k: t for k, t in self._fixes.items() if not self._outdated(k)}
        inputs = {k: t for k, t in current.items() if VerdictName.is_input_bound(k[0])}
        pool = inputs or current
        if pool:
            top = max(pool, key=lambda k: (pool[k], k))
            return top[0], self._words[top]
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

    def _outdated(self, key: tuple[str, str]) -> bool:
        """An input-bound num_workers fix the run's last DataLoader has applied: advised only
        at other num_workers, and the last has at least the workers it named."""
        target = self._targets.get(key)
        advised, last = self._workers.get(key), self._last_workers
        return (
            VerdictName.is_input_bound(key[0])
            and target is not None
            and bool(advised)
            and last is not None
            and last not in advised
            and last >= target
        )


def _target(v: Verdict, key: tuple[str, str]) -> int | None:
    """The num_workers the verdict's first fix names, which the verdict carries; read from the
    words only in records written before it did."""
    if v.fix_ids and key[1] not in WORKERS_FIXES:
        return None
    if v.workers_target is not None:
        return v.workers_target
    return workers_target_in_words(v.fixes[0])


def _first_id(v: Verdict) -> str:
    """The first fix's id; its words for a record written before fixes had ids."""
    return v.fix_ids[0] if v.fix_ids else v.fixes[0]
