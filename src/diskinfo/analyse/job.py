"""The job's verdict: which rank of a distributed job holds every other rank back, and why.

In data-parallel training every rank waits for the slowest in the gradient all-reduce, so one
rank starved of data makes the whole job slow while the other ranks' own figures show long
steps and no data wait. Each node's monitor records its ranks' figures (`RankFigures`, from
the wrapper) beside the node's own verdict; this module reads those records from every node
of a job and decides, per interval:

- `balanced`: no rank is input-bound (or too few ranks are seen to tell);
- `straggler`: some, but not most, ranks wait for data at least HIGHLY_INPUT_BOUND of their
  steps: the worst of them is named, with the cause and first fix of its own node's verdict;
- `input-bound`: most ranks wait for data: the job's input pipeline as a whole is the limit.

A verdict changes only after another one was decided `hold` intervals in a row (as the node's
held verdict does). docs/cluster.md says what this needs and what it cannot see.
"""

from __future__ import annotations

import statistics
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from diskinfo import thresholds as t
from diskinfo.analyse.fix_ids import FixId
from diskinfo.analyse.fixes import JOB_VIEW
from diskinfo.record import Cause, IntervalRecord, Verdict, VerdictName

BALANCED = "balanced"
STRAGGLER = "straggler"
INPUT_BOUND = "input-bound"
UNKNOWN = "unknown"

# a rank heard from in the last this many intervals still counts for the job's verdict: the
# nodes' intervals are not aligned, and a record can be one interval late on a shared folder
STALE_INTERVALS = 3.0
# a node's verdict on its loop's start says nothing of the steady cause: no cause, no vote
_NO_VOTE = frozenset({Cause.EPOCH_START.value, Cause.STARTING.value})


@dataclass
class RankSample:
    """One rank over one interval, as its node's record holds it, with its node's verdict."""

    ts: float
    elapsed_s: float
    rank: int
    world_size: int
    job_id: str
    node: str
    batches: int
    wait_s: float
    step_s: float
    wait_share: float
    node_verdict: str = ""  # the node's own interval verdict ("input-bound: disk", ...)
    node_cause: str = ""
    detail: str = ""  # the figure behind the node's cause ("its r_await 120 ms")
    fix: str = ""  # the first fix of the node's verdict

    @property
    def input_bound(self) -> bool:
        return self.wait_share >= t.HIGHLY_INPUT_BOUND

    def per_batch_ms(self, seconds: float) -> float:
        return 1000 * seconds / self.batches if self.batches else 0.0


def sample_cause(s: RankSample) -> str:
    """The rank's cause from its node's verdict; none from a verdict on the loop's start."""
    return "" if s.node_cause in _NO_VOTE else cause_word(s.node_verdict)


def cause_word(node_verdict: str) -> str:
    """The job's cause: "disk" (the data device, small-file random reads included) or "cpu"
    from the node's verdict; "" for a node verdict that is not input-bound."""
    if node_verdict == VerdictName.INPUT_CPU:
        return "cpu"
    if VerdictName.is_input_bound(node_verdict):
        return "disk"
    return ""


def _detail(record: IntervalRecord, cause: str) -> str:
    """The one figure a user checks first for the cause: the data device's read wait for the
    disk, the CPU's business for the cpu."""
    if cause == "disk" and record.devices:
        dev = max(record.devices, key=lambda d: d.r_await)
        return f"its r_await {dev.r_await:.0f} ms on {dev.device}"
    if cause == "cpu" and record.cpu is not None:
        cpu = record.cpu
        if cpu.cgroup_cpu_throttled:
            return f"its CPU quota throttled {cpu.cgroup_cpu_throttled:.0%} of periods"
        busy = cpu.cgroup_cpu_busy if cpu.cgroup_cpu_busy is not None else cpu.cpu_busy
        return f"its CPU {busy:.0f}% busy"
    return ""


def rank_samples(record: IntervalRecord) -> list[RankSample]:
    """The ranks a node's record holds, each with the node's own verdict beside it."""
    if record.loader is None or not record.loader.ranks:
        return []
    v = record.verdict
    # the node's held verdict, what its own user reads (one odd interval does not move it);
    # the interval's own where only it is input-bound (the node's hold has yet to follow)
    node_verdict, node_cause = (v.verdict, v.cause) if v is not None else ("", "")
    held_bound = v is not None and VerdictName.is_input_bound(v.verdict)
    if v is not None and not held_bound and VerdictName.is_input_bound(v.interval_verdict):
        node_verdict, node_cause = v.interval_verdict, v.interval_cause
    cause = cause_word(node_verdict)
    detail = _detail(record, cause)
    if node_verdict == VerdictName.INPUT_SMALL_FILES:
        detail = f"{detail}, small-file random reads"
    return [
        RankSample(
            ts=record.ts,
            elapsed_s=record.elapsed_s,
            rank=r.rank,
            world_size=r.world_size,
            job_id=r.job_id,
            node=r.node or record.host,
            batches=r.batches,
            wait_s=r.wait_s,
            step_s=r.step_s,
            wait_share=r.wait_share,
            node_verdict=node_verdict,
            node_cause=node_cause,
            detail=detail,
            fix=v.fixes[0] if v is not None and v.fixes else "",
        )
        for r in record.loader.ranks
    ]


@dataclass
class JobVerdict:
    """One interval's verdict for one job."""

    kind: str  # BALANCED, STRAGGLER, INPUT_BOUND, UNKNOWN
    job_id: str
    world_size: int
    ranks_seen: int
    summary: str
    straggler: RankSample | None = None
    cause: str = ""  # the straggler's cause: "disk", "cpu", ... ("" where its node cannot say)
    fix: str = ""
    waiting: list[int] = field(default_factory=list)  # ranks that wait for the straggler

    @property
    def key(self) -> tuple[str, int | None, str]:
        """What the held verdict holds: a change of straggler or of its cause is a change."""
        s = self.straggler
        return (self.kind, s.rank if s else None, self.cause)

    def names(self, rank: int) -> bool:
        return self.straggler is not None and self.straggler.rank == rank


def judge(samples: Iterable[RankSample], job_id: str = "") -> JobVerdict:
    """One interval's verdict from the latest sample of each rank of one job."""
    latest: dict[int, RankSample] = {}
    for s in samples:
        if s.rank not in latest or s.ts > latest[s.rank].ts:
            latest[s.rank] = s
    ranks = sorted(latest.values(), key=lambda s: s.rank)
    world = max((s.world_size for s in ranks), default=0)
    seen = len(ranks)
    base = {"job_id": job_id or (ranks[0].job_id if ranks else ""), "world_size": world}
    if seen < 2:
        return JobVerdict(
            UNKNOWN, ranks_seen=seen, summary=f"{seen} of {world} ranks reporting", **base
        )
    slow = [s for s in ranks if s.input_bound]
    if not slow:
        top = max(ranks, key=lambda s: s.wait_share)
        return JobVerdict(
            BALANCED,
            ranks_seen=seen,
            summary=f"balanced: no rank waits for data {t.HIGHLY_INPUT_BOUND:.0%} of its "
            f"steps or more (most: rank {top.rank} on {top.node}, {top.wait_share:.0%})",
            **base,
        )
    if 2 * len(slow) > seen:
        shares = statistics.median(s.wait_share for s in slow)
        return JobVerdict(
            INPUT_BOUND,
            ranks_seen=seen,
            summary=f"input-bound: {len(slow)} of {seen} ranks wait for data "
            f"(median {shares:.0%} of their steps): the job's input pipeline is the limit, "
            "not one rank",
            **base,
        )
    worst = max(slow, key=lambda s: s.wait_share)
    others = [s for s in ranks if s is not worst]
    cause = sample_cause(worst)
    why = (
        f"cause: {cause}" + (f", {worst.detail}" if worst.detail else "")
        if cause
        else (f"its node's verdict: {worst.node_verdict or 'none'}")
    )
    step_ms = statistics.median(o.per_batch_ms(o.wait_s + o.step_s) for o in others)
    own_ms = worst.per_batch_ms(worst.wait_s + worst.step_s)
    also = f" ({len(slow) - 1} more rank(s) input-bound)" if len(slow) > 1 else ""
    summary = (
        f"straggler: rank {worst.rank} on {worst.node} waits for data {worst.wait_share:.0%} "
        f"of its steps ({why}); the other {len(others)} ranks wait for it: their steps take "
        f"{step_ms:.0f} ms, its data wait plus its step {own_ms:.0f} ms{also}"
    )
    return JobVerdict(
        STRAGGLER,
        ranks_seen=seen,
        summary=summary,
        straggler=worst,
        cause=cause,
        fix=worst.fix,
        waiting=[o.rank for o in others],
        **base,
    )


# intervals another job verdict must be decided in a row: the job's verdict rests on the ranks'
# own data-wait shares (the cause is voted apart, CAUSE_VOTES), so two suffice, and a fixed
# straggler reads balanced within three intervals whatever the node's hold
JOB_HOLD = 2


class JobHold:
    """The held job verdict: another one replaces it only after `hold` intervals in a row
    (unknown is left at once, and a straggler's cause, once its node names one, is filled in
    at once), as the node's held verdict (analyse/diagnoser.Hysteresis)."""

    def __init__(self, hold: int | None = None) -> None:
        self.hold = max(1, JOB_HOLD if hold is None else hold)
        self.held: JobVerdict | None = None
        self._run: list[JobVerdict] = []

    def fills_in(self, decided: JobVerdict) -> bool:
        """The held straggler, with the cause its node had not named yet."""
        held = self.held
        return held is not None and held.key[:2] == decided.key[:2] and not held.cause

    def push(self, decided: JobVerdict) -> JobVerdict:
        if self.held is None or (self.held.kind == UNKNOWN and decided.kind != UNKNOWN):
            self.held, self._run = decided, []
            return decided
        if decided.key == self.held.key or self.fills_in(decided):
            self.held, self._run = decided, []  # same verdict: this interval's figures
            return decided
        self._run = [v for v in self._run if v.key == decided.key] + [decided]
        if len(self._run) >= self.hold:
            self.held, self._run = decided, []
        return self.held


@dataclass
class Span:
    """A stretch of time under one held job verdict."""

    start: float
    end: float
    verdict: JobVerdict


def job_ids(records: Iterable[IntervalRecord]) -> list[str]:
    """The distributed jobs these records hold ranks of, in order of first appearance."""
    seen: dict[str, None] = {}
    for rec in records:
        for r in rec.loader.ranks if rec.loader is not None else []:
            seen.setdefault(r.job_id, None)
    return list(seen)


def timeline(
    nodes: list[list[IntervalRecord]], job_id: str, hold: int | None = None
) -> list[tuple[float, JobVerdict, JobVerdict]]:
    """The job's verdict over time from each node's records: one per interval (the nodes'
    median interval; their clocks are not aligned), (the time of the latest record it rests
    on, its own verdict, the held verdict), over each rank's latest sample heard within
    STALE_INTERVALS."""
    events = sorted(
        (s for recs in nodes for rec in recs for s in rank_samples(rec) if s.job_id == job_id),
        key=lambda s: s.ts,
    )
    if not events:
        return []
    width = statistics.median(s.elapsed_s for s in events) or 1.0
    latest: dict[int, RankSample] = {}
    votes: dict[int, deque[RankSample]] = {}
    held = JobHold(hold)
    out: list[tuple[float, JobVerdict, JobVerdict]] = []
    i = 0
    end = events[0].ts + width
    while i < len(events):
        while i < len(events) and events[i].ts < end:
            latest[events[i].rank] = _voted(events[i], votes)
            i += 1
        fresh = [s for s in latest.values() if end - s.ts <= STALE_INTERVALS * width]
        if not fresh and i < len(events):  # a gap (the job paused): on to its next record
            end = events[i].ts + width
            continue
        if fresh:
            now = judge(fresh, job_id)
            # known as soon as the latest of those records was written
            out.append((max(x.ts for x in fresh), now, held.push(now)))
        end += width
    return out


CAUSE_VOTES = 5  # a rank's last node verdicts that vote for its cause (3 of 5 change it)


def _voted(sample: RankSample, votes: dict[int, deque[RankSample]]) -> RankSample:
    """`sample` with its node's verdict, figure and fix from the input-bound verdict its node
    held most over the rank's last CAUSE_VOTES intervals: a node's verdict that wavers between
    causes for an interval or two does not move the job's cause (or its fix)."""
    recent = votes.setdefault(sample.rank, deque(maxlen=CAUSE_VOTES))
    if sample.node_cause in _NO_VOTE:
        return sample
    recent.append(sample)
    bound = [s for s in recent if sample_cause(s)]
    if not bound or not VerdictName.is_input_bound(sample.node_verdict):
        return sample
    top = Counter(sample_cause(s) for s in bound).most_common(1)[0][0]
    if sample_cause(sample) == top:
        return sample
    like = next(s for s in reversed(bound) if sample_cause(s) == top)
    return replace(
        sample,
        node_verdict=like.node_verdict,
        node_cause=like.node_cause,
        detail=like.detail,
        fix=like.fix,
    )


def spans(points: list[tuple[float, JobVerdict, JobVerdict]]) -> list[Span]:
    """Stretches of one held verdict (its key) from `timeline`."""
    out: list[Span] = []
    for ts, _now, held in points:
        if out and out[-1].verdict.key == held.key:
            out[-1].end = ts
            out[-1].verdict = held
        else:
            out.append(Span(ts, ts, held))
    return out


def in_job(record: IntervalRecord, own: Verdict, peers: list[IntervalRecord] | None) -> Verdict:
    """A node's own verdict, told that its ranks are part of a job. With a world size above 1
    a step that looks like the limit includes the wait for the other ranks in collectives, so
    `compute-bound` stands only on the job's word: the other ranks' records (`peers`, the
    latest of each other node) all heard and none input-bound. Where they name a straggler on
    another node: `waits for another rank`, with the straggler's cause and its fix; with no
    word from them: `compute-bound` for the job's step (cause `job-step`), sending the user
    to the job's verdict instead of to faster compute. Anything else is left as decided."""
    loader = record.loader
    world = loader.world_size if loader is not None else None
    if world is None or world < 2 or own.verdict != VerdictName.COMPUTE_BOUND:
        return own
    mine = rank_samples(record)
    ids = {s.job_id for s in mine}
    fresh = [
        s
        for peer in peers or []
        if abs(record.ts - peer.ts) <= STALE_INTERVALS * max(peer.elapsed_s, record.elapsed_s)
        for s in rank_samples(peer)
        if s.job_id in ids and s.rank not in {m.rank for m in mine}
    ]
    if fresh:
        job = judge(mine + fresh)
        if (
            job.kind == STRAGGLER
            and job.straggler is not None
            and not any(job.names(m.rank) for m in mine)
        ):
            s = job.straggler
            cause = f"cause: {job.cause}" if job.cause else f"its verdict: {s.node_verdict}"
            return own.but(
                verdict=VerdictName.WAITS_FOR_RANK,
                cause=Cause.OTHER_RANK,
                summary=f"waits for rank {s.rank} on {s.node}: that rank waits for data "
                f"{s.wait_share:.0%} of its steps ({cause}), this one "
                f"{_shares(mine)}; the step here is the all-reduce waiting for it",
                fixes=[f"on {s.node} (rank {s.rank}): {s.fix}"] if s.fix else [],
                fix_ids=[FixId.STRAGGLER] if s.fix else [],
                severity="none",
            )
        if job.kind == BALANCED and job.ranks_seen >= world:
            return own  # every rank heard, none waits for data: the job's step is the limit
    return own.but(
        cause=Cause.JOB_STEP,
        summary=f"{own.summary}; this is one of {world} ranks: its step includes the wait "
        "for the others in collectives, so which rank holds the job back is the job's verdict",
        fixes=[JOB_VIEW.text(None)],  # type: ignore[arg-type]  (needs no signals)
        fix_ids=[JOB_VIEW.id],
    )


def _shares(mine: list[RankSample]) -> str:
    return ", ".join(f"rank {m.rank} {m.wait_share:.0%}" for m in mine)
