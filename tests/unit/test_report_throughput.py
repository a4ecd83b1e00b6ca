"""`diskinfo report`'s throughput is the training loop's own: batches and samples over the time
the loop ran (its wait + step per process), not over every interval a loader file existed in.
The loop's samples come from `diskinfo.torch` (the batch's leading dimension) through the
loader collector."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from diskinfo import cli
from diskinfo.collectors.loader import interval_figures
from diskinfo.loader_state import LoaderCounters, decode, encode
from diskinfo.record import IntervalRecord, LoaderFigures
from diskinfo.report import render_comparison, summarise
from diskinfo.torch import batch_len
from tests.helpers.records import write_run


def rec(ts: float, loader: LoaderFigures | None, elapsed: float = 5.0) -> IntervalRecord:
    return IntervalRecord(ts=ts, elapsed_s=elapsed, host="test", loader=loader)


def loop(batches: int, busy: float, processes: int = 1, samples: int = 0) -> LoaderFigures:
    return LoaderFigures(
        batches=batches, wait_s=busy * 0.4, step_s=busy * 0.6, processes=processes, samples=samples
    )


def run(rate: float, batch: int = 32, t0: float = 1_800_000_000.0) -> list[IntervalRecord]:
    """A loop at `rate` batches/s that starts 2.5 s into the first 5 s interval, runs 10 s, ends
    and leaves its process alive (saving a checkpoint) for another interval, then exits."""
    spans = [2.5, 5.0, 2.5]  # loop seconds in each of the intervals it ran in
    recs = [
        rec(t0 + 5 * (i + 1), loop(round(rate * s), s, samples=round(rate * s) * batch))
        for i, s in enumerate(spans)
    ]
    recs.append(rec(t0 + 20, LoaderFigures(processes=0)))  # alive, not iterating
    recs.append(rec(t0 + 25, None))  # gone
    return recs


def test_batches_and_samples_per_second_of_the_loop_s_own_time():
    s = summarise(run(10.0))
    assert s.loop_s == pytest.approx(10.0)
    assert s.batches_s == pytest.approx(10.0) and s.samples_s == pytest.approx(320.0)
    assert s.duration_s == 25.0  # the run; the rate is not diluted by it (100 / 20 would be 5)


def test_parallel_processes_share_the_wall_clock():
    # two data-parallel processes, each iterating the whole 5 s at 4 batches/s
    s = summarise([rec(5.0, loop(40, 10.0, processes=2, samples=40 * 16))])
    assert s.loop_s == pytest.approx(5.0) and s.batches_s == pytest.approx(8.0)
    assert s.samples_s == pytest.approx(128.0)


def test_records_without_samples_or_process_count_still_give_batches_per_second():
    s = summarise([rec(5.0, LoaderFigures(batches=20, wait_s=1.0, step_s=3.0))])
    assert s.batches_s == pytest.approx(5.0) and s.samples_s is None


def test_comparison_ratio_is_the_ratio_of_the_loops_rates(tmp_path: Path, capsys):
    a, b = run(12.4), run(15.6, t0=1_800_003_600.0)
    sa, sb = summarise(a, "a"), summarise(b, "b")
    want = sb.batches_s / sa.batches_s
    assert want == pytest.approx(15.6 / 12.4)
    lines = {line.split("  ")[0]: line for line in render_comparison(sa, sb).splitlines()}
    assert f"x{want:.2f}" in lines["batches/s"] and f"x{want:.2f}" in lines["samples/s"]
    assert cli.main(["report", str(write_run(tmp_path / "a.jsonl", a)), "--no-png"]) == 0
    out = capsys.readouterr().out
    assert "throughput: 12.40 batches/s, 396.8 samples/s (the training loop ran 0m 10s)" in out


def test_the_collector_sums_samples_per_interval():
    prev = {7: LoaderCounters(pid=7, batches=10, wait_s=1.0, step_s=2.0, samples=320)}
    cur = {
        7: LoaderCounters(pid=7, batches=30, wait_s=2.0, step_s=5.0, samples=960),
        8: LoaderCounters(pid=8, batches=5, wait_s=0.5, step_s=0.5, samples=80),  # new process
    }
    fig = interval_figures(prev, cur, 5.0)
    assert fig is not None and (fig.batches, fig.samples, fig.processes) == (25, 720, 2)
    assert decode(encode(cur[7])).samples == 960
    legacy = json.dumps({"schema": "diskinfo.loader/1", "pid": 3, "batches": 2})
    assert decode(legacy).samples == 0  # a wrapper from before the count: none


@pytest.mark.parametrize(
    ("batch", "n"),
    [
        ((torch.zeros(16, 3, 8, 8), torch.zeros(16)), 16),
        ([torch.zeros(5, 2), [torch.zeros(5)]], 5),
        ({"image": np.zeros((7, 4)), "label": np.zeros(7)}, 7),
        (torch.zeros(9, 1), 9),
        ((["a.jpg", "b.jpg", "c.jpg"], torch.zeros(3)), 3),
        ([1, 2, 3, 4], 4),
        (torch.tensor(3.0), 0),  # a scalar: no leading dimension
        ("text", 0),
        ({}, 0),
        ([], 0),
        (object(), 0),
    ],
)
def test_batch_len(batch, n):
    assert batch_len(batch) == n


def test_batch_len_never_raises_on_an_odd_shape():
    class Odd:
        shape = property(lambda self: 42)  # not a sequence

    assert batch_len(Odd()) == 0
