"""One run's summary: where the time went, the first fix, the loop's throughput, disk and GPU.

Every share is weighted by the intervals' measured length, so a run recorded at a mixed interval
still adds up. Throughput is the training loop's own: batches and samples the loader figures
counted, divided by the time the loop ran (its wait + step, per process), so the report states
what the training script itself measures, not a rate diluted by intervals in which the process
was starting, evaluating or saving. The disk figures are the verdict's busiest device of each
interval (`busiest_device`), not a sum: stacked devices (dm over its disk) would count twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from diskinfo.analyse.signals import busiest_device
from diskinfo.analyse.tally import VerdictTally
from diskinfo.record import IntervalRecord, LoaderFigures, training_gpus


def loop_seconds(loader: LoaderFigures) -> float:
    """Wall time the training loop ran in an interval: its wait + step, per process (the
    processes of one job run side by side; records from before the count have none: one)."""
    return (loader.wait_s + loader.step_s) / max(loader.processes, 1)


def gpu_util(record: IntervalRecord) -> float | None:
    gpus = training_gpus(record.gpus)
    if not gpus:
        return None
    return sum(g.util_mean for g in gpus) / len(gpus)


def wait_share(record: IntervalRecord) -> float | None:
    loader = record.loader
    if loader is None or loader.wait_s + loader.step_s <= 0:
        return None
    return loader.wait_s / (loader.wait_s + loader.step_s)


@dataclass
class Summary:
    name: str
    start: float
    end: float
    duration_s: float
    intervals: int
    verdict_shares: dict[str, float]  # share of recorded time, largest first
    top_fix: str | None
    top_fix_verdict: str | None
    batches_s: float | None  # loader batches per second of the loop's own time
    samples_s: float | None  # samples per second of the loop's own time (None: not counted)
    loop_s: float  # seconds the training loop ran (wait + step, per process)
    wait_share: float | None  # sum(wait) / sum(wait + step)
    disk_read_mb_s: float | None  # time-weighted mean
    disk_read_mb_s_max: float | None
    disk_r_s: float | None
    disk_rareq_kb: float | None  # bytes read / reads: the mean request size
    disk_r_await_ms: float | None  # read-weighted, as iostat over the whole run
    disk_util: float | None
    gpu_util: float | None
    gpus: int  # the training's GPUs (record.training_gpus), most in one interval
    warnings: dict[str, int] = field(default_factory=dict)
    gpus_seen: int = 0  # every GPU NVML listed, the training's and the unused
    start_words: str | None = None  # a long start and its cause (StartTally.words)
    exit_code: int | None = None  # the training command's exit status (None: not recorded)
    ran_s: float | None = None  # how long the training command ran, where recorded

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _weighted(pairs: list[tuple[float, float]]) -> float | None:
    weight = sum(w for w, _ in pairs)
    return sum(w * v for w, v in pairs) / weight if weight > 0 else None


def summarise(records: Sequence[IntervalRecord], name: str = "") -> Summary:
    tally = VerdictTally()
    for r in records:
        tally.add(r, r.verdict)
    top = tally.top_fix()

    loaders = [r.loader for r in records if r.loader is not None]
    loop_s = sum(loop_seconds(f) for f in loaders)
    wait = sum(f.wait_s for f in loaders)
    step = sum(f.step_s for f in loaders)
    batches = sum(f.batches for f in loaders)
    samples = sum(f.samples for f in loaders)

    disks = [(r.elapsed_s, d) for r in records if (d := busiest_device(r)) is not None]
    reads = sum(w * d.r_s for w, d in disks)
    read_mb = sum(w * d.rmb_s for w, d in disks)
    gpu = [(r.elapsed_s, u) for r in records if (u := gpu_util(r)) is not None]
    warnings: dict[str, int] = defaultdict(int)
    for r in records:
        for text in r.verdict.warnings if r.verdict is not None else []:
            warnings[text] += 1
    end = next((r.command_end for r in reversed(records) if r.command_end is not None), None)
    return Summary(
        name=name,
        start=min(r.ts - r.elapsed_s for r in records),
        end=max(r.ts for r in records),
        duration_s=tally.total_s,
        intervals=len(records),
        verdict_shares=tally.shares(),
        top_fix=top[1] if top else None,
        top_fix_verdict=top[0] if top else None,
        start_words=tally.start.words(),
        batches_s=batches / loop_s if loop_s > 0 else None,
        samples_s=samples / loop_s if loop_s > 0 and samples > 0 else None,
        loop_s=loop_s,
        wait_share=wait / (wait + step) if wait + step > 0 else None,
        disk_read_mb_s=_weighted([(w, d.rmb_s) for w, d in disks]),
        disk_read_mb_s_max=max((d.rmb_s for _, d in disks), default=None),
        disk_r_s=_weighted([(w, d.r_s) for w, d in disks]),
        disk_rareq_kb=read_mb * 1024 / reads if reads > 0 else None,
        disk_r_await_ms=(sum(w * d.r_s * d.r_await for w, d in disks) / reads if reads else None),
        disk_util=_weighted([(w, d.util) for w, d in disks]),
        gpu_util=_weighted(gpu),
        gpus=max((len(training_gpus(r.gpus)) for r in records), default=0),
        warnings=dict(warnings),
        gpus_seen=max((len(r.gpus) for r in records if r.gpus), default=0),
        exit_code=end.code if end is not None else None,
        ran_s=end.ran_s if end is not None else None,
    )
