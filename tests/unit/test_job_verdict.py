"""The job's verdict across nodes (analyse/job.py), a node's verdict inside a job (in_job), the
wrapper's job identity, and `diskinfo report` over several nodes' logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diskinfo import loader_state
from diskinfo import torch as dtorch
from diskinfo.analyse import job
from diskinfo.analyse.diagnoser import Diagnoser
from diskinfo.collectors.loader import interval_figures
from diskinfo.loader_state import LoaderCounters
from diskinfo.record import (
    Cause,
    DeviceFigures,
    IntervalRecord,
    LoaderFigures,
    RankFigures,
    Verdict,
    VerdictName,
)

NODES = ("node-1", "node-2", "node-3")
JOB = "slurm-42"


def node_record(
    ts: float, rank: int, share: float, verdict: str = "compute-bound", r_await: float = 1.0
) -> IntervalRecord:
    """One node's record with one rank of a 3-rank job: `share` of its loop waiting for data."""
    wait = share * 1.0
    ranks = [RankFigures(rank, 3, JOB, NODES[rank], 0, 100 + rank, 20, wait, 1.0 - wait, share)]
    loader = LoaderFigures(
        batches=20,
        wait_s=wait,
        step_s=1 - wait,
        wait_share=share,
        processes=1,
        ranks=ranks,
        world_size=3,
    )
    fixes = ["move the data to faster local storage"] if verdict.startswith("input") else []
    return IntervalRecord(
        ts=ts,
        elapsed_s=1.0,
        host="same-host",
        devices=[DeviceFigures("loop3", r_await=r_await)],
        loader=loader,
        verdict=Verdict(verdict, interval_verdict=verdict, fixes=fixes),
    )


def straggling(ts: float, slow: int = 1, share: float = 0.6) -> list[IntervalRecord]:
    return [
        node_record(ts, r, share, "input-bound: disk", 120.0)
        if r == slow
        else node_record(ts + 0.3, r, 0.01)
        for r in range(3)
    ]


def test_one_rank_waiting_for_data_is_the_straggler_with_its_nodes_cause():
    samples = [s for rec in straggling(10.0) for s in job.rank_samples(rec)]
    v = job.judge(samples)
    assert v.kind == job.STRAGGLER and v.straggler.rank == 1 and v.cause == "disk"
    assert v.summary.startswith("straggler: rank 1 on node-2 waits for data 60% of its steps")
    assert "cause: disk, its r_await 120 ms on loop3" in v.summary
    assert "the other 2 ranks wait for it" in v.summary
    assert v.fix == "move the data to faster local storage" and v.waiting == [0, 2]


def test_no_rank_waiting_is_balanced_and_most_waiting_is_the_jobs_input():
    calm = [s for r in range(3) for s in job.rank_samples(node_record(1.0, r, 0.02))]
    assert job.judge(calm).kind == job.BALANCED
    most = [
        s
        for r in range(3)
        for s in job.rank_samples(node_record(1.0, r, 0.5 if r else 0.02, "input-bound: cpu"))
    ]
    assert job.judge(most).kind == job.INPUT_BOUND
    assert job.judge(calm[:1]).kind == job.UNKNOWN  # one rank heard: nothing to compare


def test_timeline_holds_the_straggler_and_returns_to_balanced_within_the_hold():
    nodes: list[list[IntervalRecord]] = [[], [], []]
    for i in range(20):
        recs = (
            straggling(float(i))
            if i < 10
            else [node_record(i + 0.3 * (r != 1), r, 0.02) for r in range(3)]
        )
        if i == 5:  # one odd interval never flips the held verdict
            recs = [node_record(i + 0.3 * (r != 1), r, 0.02) for r in range(3)]
        for n, rec in enumerate(recs):
            nodes[n].append(rec)
    points = job.timeline(nodes, JOB, hold=2)
    held = [h.kind for _, _, h in points]
    assert held[1:10] == [job.STRAGGLER] * 9
    back = next(i for i, (_, _, h) in enumerate(points) if i >= 10 and h.kind == job.BALANCED)
    assert back - 10 <= 3
    assert [s.verdict.kind for s in job.spans(points)] == [job.STRAGGLER, job.BALANCED]


def test_a_rank_that_waits_for_another_says_which_on_the_peers_word():
    own = Verdict(
        VerdictName.COMPUTE_BOUND,
        cause=Cause.STEP,
        summary="the step is the limit",
        fixes=["with a GPU, mixed precision"],
    )
    recs = straggling(10.0)
    mine = recs[0]
    v = job.in_job(mine, own, [recs[1], recs[2]])
    assert v.verdict == VerdictName.WAITS_FOR_RANK and v.cause == Cause.OTHER_RANK
    assert v.summary.startswith("waits for rank 1 on node-2: that rank waits for data 60%")
    assert v.fixes == ["on node-2 (rank 1): move the data to faster local storage"]
    # no word from the others: never "faster compute" on one rank's word
    alone = job.in_job(mine, own, None)
    assert alone.verdict == VerdictName.COMPUTE_BOUND and alone.cause == Cause.JOB_STEP
    assert "one of 3 ranks" in alone.summary and "diskinfo report" in alone.fixes[0]
    assert not any("precision" in f for f in alone.fixes)
    # every rank heard and balanced: the job's step is the limit, said as decided
    calm = [node_record(10.0, r, 0.01) for r in range(3)]
    assert job.in_job(calm[0], own, calm[1:]) is own
    # stale peers (a minute old) are no word
    old = straggling(-60.0)
    assert job.in_job(mine, own, old[1:]).cause == Cause.JOB_STEP
    # a single-node run's verdict is untouched
    single = node_record(10.0, 0, 0.01)
    single.loader.world_size, single.loader.ranks = None, []
    assert job.in_job(single, own, recs) is own


def test_the_diagnoser_asks_the_peers_only_inside_a_job(monkeypatch):
    asked = []
    recs = straggling(10.0)

    def peers() -> list[IntervalRecord]:
        asked.append(1)
        return recs[1:]

    d = Diagnoser({}, hold=1, peers=peers)
    rec = recs[0]
    rec.verdict = None
    d(rec)
    assert asked


def test_the_wrapper_names_rank_job_and_node_from_the_launchers_env(monkeypatch):
    for name in (
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
        "SLURM_JOB_ID",
        "TORCHELASTIC_RUN_ID",
        "MASTER_ADDR",
        "MASTER_PORT",
        "SLURMD_NODENAME",
    ):
        monkeypatch.delenv(name, raising=False)
    assert dtorch.job_identity() == {} or dtorch.job_identity().get("rank") is not None
    monkeypatch.setitem(__import__("sys").modules, "torch.distributed", None)
    assert dtorch.job_identity() == {}
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("SLURMD_NODENAME", "node 3;<b>")
    got = dtorch.job_identity()
    assert got == {
        "rank": 5,
        "world_size": 8,
        "local_rank": 1,
        "job_id": "master-10.0.0.1:29500",
        "node": "node_3__b_",
    }
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun's default: no id
    assert dtorch.job_identity()["job_id"] == "master-10.0.0.1:29500"
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    assert dtorch.job_identity()["job_id"] == "slurm-42"
    # it travels through the state file and survives the reader's checks
    c = LoaderCounters(pid=7, batches=3, wait_s=1.0, step_s=1.0, **got)
    back = loader_state.decode(loader_state.encode(c))
    assert (back.rank, back.world_size, back.node) == (5, 8, "node_3__b_")


@pytest.mark.parametrize(
    "field,value", [("rank", "5"), ("job_id", "a\x1b[31m"), ("node", "x" * 200), ("job_id", 3)]
)
def test_a_state_file_with_a_bad_identity_is_skipped(field, value):
    text = json.dumps({"schema": loader_state.SCHEMA, "pid": 7, field: value})
    with pytest.raises(ValueError):
        loader_state.decode(text)


def test_the_collector_keeps_each_ranks_own_figures():
    prev = {
        1: LoaderCounters(pid=1, rank=0, world_size=2, job_id=JOB, node="a"),
        2: LoaderCounters(pid=2, rank=1, world_size=2, job_id=JOB, node="a"),
    }
    cur = {
        1: LoaderCounters(
            pid=1, batches=10, wait_s=0.8, step_s=0.2, rank=0, world_size=2, job_id=JOB, node="a"
        ),
        2: LoaderCounters(
            pid=2, batches=10, wait_s=0.1, step_s=0.9, rank=1, world_size=2, job_id=JOB, node="a"
        ),
    }
    fig = interval_figures(prev, cur, 1.0)
    assert fig.world_size == 2 and [r.rank for r in fig.ranks] == [0, 1]
    assert fig.ranks[0].wait_share == pytest.approx(0.8) and fig.wait_share == pytest.approx(0.45)
    rec = IntervalRecord(ts=1.0, elapsed_s=1.0, loader=fig)
    back = IntervalRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back.loader.ranks == fig.ranks


def _write_node(folder: Path, records: list[IntervalRecord]) -> None:
    folder.mkdir(parents=True)
    (folder / "diskinfo.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))


def test_report_over_a_shared_logs_folder(tmp_path, capsys):
    from diskinfo.cli import main

    nodes: list[list[IntervalRecord]] = [[], [], []]
    for i in range(12):
        for n, rec in enumerate(straggling(1000.0 + i)):
            nodes[n].append(rec)
    for n, recs in enumerate(nodes):
        _write_node(tmp_path / "logs" / NODES[n], recs)
    assert main(["report", str(tmp_path / "logs")]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"job {JOB}: 3 ranks, 3 node log(s)")
    assert "verdict: straggler: rank 1 on node-2 waits for data 60% of its steps" in out
    assert "first fix: move the data to faster local storage" in out
    assert "straggler rank 1 on node-2 (disk)" in out
    # the same job named as three folders, as JSON
    folders = [str(tmp_path / "logs" / n) for n in NODES]
    assert main(["report", *folders, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2] and doc["ranks"][1]["wait_share"] > 0.5


def test_report_over_folders_without_a_job_says_so_in_one_line(tmp_path, capsys):
    from diskinfo.cli import main

    rec = node_record(1.0, 0, 0.1)
    rec.loader.ranks = []
    _write_node(tmp_path / "a", [rec])
    assert main(["report", str(tmp_path / "a")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no rank of a distributed job" in err[0]
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) != 0
    assert "no diskinfo.jsonl" in capsys.readouterr().err


def test_a_node_verdict_wavering_for_two_intervals_keeps_the_jobs_cause():
    nodes: list[list[IntervalRecord]] = [[], [], []]
    for i in range(12):
        recs = straggling(float(i))
        if i in (6, 7):  # the straggler's node says cpu twice in a row
            recs[1] = node_record(float(i), 1, 0.6, "input-bound: cpu")
        for n, rec in enumerate(recs):
            nodes[n].append(rec)
    points = job.timeline(nodes, JOB, hold=2)
    assert {h.cause for _, _, h in points[1:]} == {"disk"}
    assert all("r_await 120 ms" in h.summary for _, _, h in points[1:])
