"""`diskinfo report DIR [DIR ...]`: a distributed job over the logs of every node: the table per
rank and the job's verdict over time (analyse/job.py decides it).

A folder named on the command line is either one node's logs folder (it holds diskinfo.jsonl)
or a job's shared logs folder (its subfolders do, one per node). Each node's last run is read
(its file gathers every monitor start); the job is the distributed job those runs hold ranks
of (the latest, where they hold several).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diskinfo import logfiles
from diskinfo.analyse import job
from diskinfo.errors import UserError
from diskinfo.record import IntervalRecord
from diskinfo.report.runs import load_with_rotated, split_runs


def node_logs(folders: list[Path]) -> list[Path]:
    """The diskinfo.jsonl of each node under `folders` (a node's folder, or a job's shared
    folder of node folders); a one-line UserError where a folder holds none."""
    found: list[Path] = []
    for folder in folders:
        if not folder.is_dir():
            raise UserError(f"{folder}: not a folder (a job's report reads folders of logs)")
        own = folder / logfiles.JSONL
        if own.is_file():
            found.append(own)
            continue
        below = sorted(
            p / logfiles.JSONL for p in folder.iterdir() if (p / logfiles.JSONL).is_file()
        )
        if not below:
            raise UserError(
                f"{folder}: no {logfiles.JSONL} in it or in its subfolders (one per node)"
            )
        found += below
    return found


@dataclass
class RankRow:
    rank: int
    node: str
    intervals: int
    batches: int
    wait_share: float  # over the job's run: wait / (wait + step)
    step_ms: float  # per batch, wait included
    node_verdict: str  # the verdict its node held most of those intervals


@dataclass
class JobReport:
    job_id: str
    world_size: int
    files: list[str]
    start: float
    end: float
    ranks: list[RankRow]
    verdict: str  # the held verdict the job spent most of its time under, in words
    fix: str
    spans: list[dict[str, Any]] = field(default_factory=list)
    steady_share: float = 0.0  # intervals whose own verdict is the one held

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def build(folders: list[Path], job_id: str | None = None) -> JobReport:
    files = node_logs(folders)
    nodes: list[list[IntervalRecord]] = []
    for path in files:
        records, _ = load_with_rotated(path)
        nodes.append(split_runs(records)[-1])
    ids = job.job_ids(r for recs in nodes for r in recs)
    if not ids:
        raise UserError(
            "no rank of a distributed job in these logs: the training's DataLoader wrapped "
            "with diskinfo.torch.watch under torch.distributed (or RANK/WORLD_SIZE) records them"
        )
    if job_id is not None and job_id not in ids:
        raise UserError(f"no job {job_id!r} in these logs (found: {', '.join(ids)})")
    chosen = job_id or ids[-1]
    points = job.timeline(nodes, chosen)
    spans = job.spans(points)
    # the verdict held for most intervals, in its latest interval's words
    held = Counter(h.key for _, _, h in points if h.kind != job.UNKNOWN)
    main = None
    if held:
        top = held.most_common(1)[0][0]
        main = next(h for _, _, h in reversed(points) if h.key == top)
    steady = sum(1 for _, now, held in points if now.key == held.key)
    return JobReport(
        job_id=chosen,
        world_size=max((v.world_size for _, v, _ in points), default=0),
        files=[str(p) for p in files],
        start=points[0][0] if points else 0.0,
        end=points[-1][0] if points else 0.0,
        ranks=_rows(nodes, chosen),
        verdict=main.summary if main else "no interval with two ranks reporting",
        fix=main.fix if main else "",
        spans=[
            {
                "start": s.start,
                "end": s.end,
                "verdict": s.verdict.kind,
                "rank": s.verdict.straggler.rank if s.verdict.straggler else None,
                "node": s.verdict.straggler.node if s.verdict.straggler else None,
                "cause": s.verdict.cause,
                "summary": s.verdict.summary,
            }
            for s in spans
        ],
        steady_share=steady / len(points) if points else 0.0,
    )


def _rows(nodes: list[list[IntervalRecord]], job_id: str) -> list[RankRow]:
    samples: dict[int, list[job.RankSample]] = {}
    for recs in nodes:
        for rec in recs:
            for s in job.rank_samples(rec):
                if s.job_id == job_id:
                    samples.setdefault(s.rank, []).append(s)
    rows = []
    for rank, got in sorted(samples.items()):
        wait, step = sum(s.wait_s for s in got), sum(s.step_s for s in got)
        batches = sum(s.batches for s in got)
        verdicts = Counter(s.node_verdict for s in got if s.batches)
        rows.append(
            RankRow(
                rank=rank,
                node=got[-1].node,
                intervals=len(got),
                batches=batches,
                wait_share=wait / (wait + step) if wait + step > 0 else 0.0,
                step_ms=1000 * (wait + step) / batches if batches else 0.0,
                node_verdict=verdicts.most_common(1)[0][0] if verdicts else "",
            )
        )
    return rows


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(ts))


def render(r: JobReport) -> str:
    """The job's report in words: who it is, the table per rank, the verdict and its spans."""
    lines = [
        f"job {r.job_id}: {r.world_size} ranks, {len(r.files)} node log(s), "
        f"{_clock(r.start)}-{_clock(r.end)} ({r.end - r.start:.0f} s)",
        "",
        f"{'rank':>4}  {'node':<16} {'data wait':>9} {'ms/step':>8} {'batches':>8}  node's verdict",
    ]
    for row in r.ranks:
        lines.append(
            f"{row.rank:>4}  {row.node[:16]:<16} {row.wait_share:>9.0%} {row.step_ms:>8.0f} "
            f"{row.batches:>8}  {row.node_verdict}"
        )
    missing = r.world_size - len(r.ranks)
    if missing > 0:
        lines.append(f"      ({missing} rank(s) without records: no wrapper or no logs here)")
    lines += ["", f"verdict: {r.verdict}"]
    if r.fix:
        lines.append(f"first fix: {r.fix}")
    lines += ["", "over time:"]
    for s in r.spans:
        who = f" rank {s['rank']} on {s['node']}" if s["rank"] is not None else ""
        why = f" ({s['cause']})" if s["cause"] else ""
        lines.append(
            f"  {_clock(s['start'])}-{_clock(s['end'])}  {s['verdict']}{who}{why}"
            f"  {s['end'] - s['start']:.0f} s"
        )
    return "\n".join(lines)


__all__ = ["JobReport", "build", "node_logs", "render"]
