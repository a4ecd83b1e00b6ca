"""Recorded shared-node runs replayed through the analysis: one headline, at most one change
a minute, the borderline said as such, the start judged.

The fixtures are intervals `benchmarks/verdicts.py` captured on this project's 2-core VM
(2 s intervals, 50 s steady: the first capture of its shared-node rows, before the one in
benchmarks/results/verdicts/; per-device counters and the monitor's own verdicts left out, as
the analysis judges them again here): `two-limits` is the `capped+cpu` row (reads capped at 300 IOPS
beside a CPU hog on every core), `borderline` the `compute-bound+cpu` row (a heavy step, the
data-wait share 2-14% per interval beside the hog), `slow-start` the `slow-start-bw` row (the
start reads 200 MiB through an 8 MiB/s cap, beside the hog's leftovers)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from diskinfo.analyse.baseline import parse
from diskinfo.analyse.diagnoser import Diagnoser
from diskinfo.analyse.tally import VerdictTally
from diskinfo.record import Cause, IntervalRecord, Verdict
from diskinfo.report.summary import summarise
from diskinfo.report.text import render

FIXTURES = Path(__file__).parent.parent / "fixtures" / "verdicts"
WARMUP_S = 10.0  # the matrix's: steady intervals begin 10 s after the first batch's


def replay(name: str) -> list[tuple[IntervalRecord, Verdict]]:
    bases = {b.device: b for b in parse((FIXTURES / "baseline.json").read_text())}
    diag = Diagnoser(bases, hold=2)
    lines = (FIXTURES / f"{name}.jsonl").read_text().splitlines()
    out = []
    for line in lines:
        record = IntervalRecord.from_dict(json.loads(line))
        out.append((record, diag(record)))
    return out


def split(run: list[tuple[IntervalRecord, Verdict]]):
    """(the start's intervals, the steady ones): before the first batch's interval, and from
    WARMUP_S after its beginning."""
    first = next(r for r, _ in run if r.loader is not None and r.loader.batches)
    onset = first.ts - first.elapsed_s
    start = [(r, v) for r, v in run if r.procs and r.ts <= onset]
    steady = [(r, v) for r, v in run if r.ts - r.elapsed_s >= onset + WARMUP_S]
    return start, steady


def changes_per_min(steady) -> float:
    changes = sum(a.cause != b.cause for (_, a), (_, b) in itertools.pairwise(steady))
    return changes / (sum(r.elapsed_s for r, _ in steady) / 60)


def test_two_limits_keep_one_headline_and_say_the_other():
    _, steady = split(replay("two-limits"))
    assert len(steady) >= 20
    assert {v.cause for _, v in steady} == {Cause.CGROUP_CAP}
    assert changes_per_min(steady) == 0
    # the neighbour is said beside the cap, its fix after the cap's
    also = [v for _, v in steady if "; also: the host's other work takes the CPU" in v.summary]
    assert len(also) >= len(steady) * 0.8, len(also)
    for v in also:
        assert v.fixes[0].startswith("raise or remove this container's cgroup read limit")
        assert any(f.startswith("give this job CPUs no other work takes") for f in v.fixes)


def test_a_borderline_share_holds_one_verdict_and_says_its_range():
    _, steady = split(replay("borderline"))
    assert changes_per_min(steady) <= 1.0
    causes = [v.cause for _, v in steady]
    top = max(set(causes), key=causes.count)
    assert causes.count(top) / len(causes) >= 0.95, causes
    borderline = [v for _, v in steady if "(borderline:" in v.summary]
    assert borderline, [v.summary for _, v in steady]
    assert any("% per interval: borderline, held)" in v.evidence[0] for v in borderline)
    # the neighbour that takes the loop's CPU is said, its fix first
    for _, v in steady:
        assert "the host's other work takes the CPU" in v.summary, v.summary
        assert v.fixes[0].startswith("give this job CPUs no other work takes"), v.fixes


def test_a_start_behind_a_read_cap_is_said_and_never_told_to_wrap():
    run = replay("slow-start")
    start, steady = split(run)
    assert len(start) >= 10
    assert all(v.cause == Cause.STARTING for _, v in start)
    capped = [v for r, v in start if any(c.throttled_by for c in r.cgroup_io)]
    assert len(capped) >= 8
    assert all("at this container's cgroup read cap (8.0 MB/s on loop0)" in v.summary
               for v in capped)  # fmt: skip
    assert not any("wrap" in f for _, v in run for f in v.fixes)
    assert {v.cause for _, v in steady} == {Cause.CGROUP_CAP}
    tally = VerdictTally()
    for r, v in run:
        tally.add(r, v)
    words = tally.start.words()
    assert words is not None and "reading at the container's read cap (8.0 MB/s)" in words
    assert words.startswith("start ") and pytest.approx(36, abs=4) == float(words.split()[1])
    # the report says it too: one tally
    for r, v in run:
        r.verdict = v
    report = render(summarise([r for r, _ in run], "slow-start"))
    assert words in report.splitlines(), report
