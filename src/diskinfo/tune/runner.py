"""Measure one DataLoader setting for a bounded time on the user's dataset.

Map-style datasets are read through one endless shuffled index stream that every setting
continues, so no setting re-reads what the one before it just read. Per setting: the time
from iter() to the first batch (worker start), the steady rate after it, the share of the
loop spent waiting for data (with a simulated step of `step_s` per batch), the CPU each
worker used, and the time a second iter() takes to deliver (the next epoch's start, which
persistent_workers removes).

Cold (`--cold`): the cache is dropped, then at most one epoch is read (the same permutation
for every setting, or one pass of an IterableDataset), so no sample is counted twice: its
second read, served by the cache just filled, would inflate a cold figure. A slot long enough
for more repeats that, each pass pooled.
"""

from __future__ import annotations

import os
import random
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch.utils.data

from diskinfo.errors import UserError
from diskinfo.tune.cache import make_cold
from diskinfo.tune.grid import Setting
from diskinfo.tune.load import Workload, describe_failure

TICKS = os.sysconf("SC_CLK_TCK")
MIN_COLD_PASS = 1.0  # seconds: a shorter remainder of a cold slot is not worth a cache drop


@dataclass
class Result:
    setting: Setting
    samples: int
    seconds: float  # after the first batch
    start_s: float  # iter() to the first batch
    restart_s: float | None  # a second iter() to its first batch
    wait_share: float
    cpu_per_worker: float  # cores: 1.0 = one core busy (the main process for num_workers=0)
    cache: str
    measurements: int = 1  # measurements pooled into this one
    # per sample, in seconds: the step's wall time and CPU (its process's, every thread), and
    # the loading's CPU (the workers', or the main process's inside next() with none)
    step_s: float = 0.0
    step_cpu_s: float = 0.0
    load_cpu_s: float = 0.0
    # samples/s the cores allow once the step takes its share (tune/cap.py; None: no cap)
    ceiling: float | None = None
    # how mixed this setting's batches are beside a fully shuffled loader (tune/mix.py;
    # None: not known for this dataset)
    mix: dict[str, Any] | None = None

    def merge(self, other: Result) -> Result:
        """Two measurements of one setting pooled: samples over seconds, times averaged."""
        restarts = [x for x in (self.restart_s, other.restart_s) if x is not None]
        return Result(
            self.setting,
            self.samples + other.samples,
            self.seconds + other.seconds,
            (self.start_s + other.start_s) / 2,
            sum(restarts) / len(restarts) if restarts else None,
            (self.wait_share + other.wait_share) / 2,
            (self.cpu_per_worker + other.cpu_per_worker) / 2,
            self.cache,
            self.measurements + other.measurements,
            *(
                (a * self.seconds + b * other.seconds) / max(self.seconds + other.seconds, 1e-9)
                for a, b in (
                    (self.step_s, other.step_s),
                    (self.step_cpu_s, other.step_cpu_s),
                    (self.load_cpu_s, other.load_cpu_s),
                )
            ),
            None
            if self.ceiling is None or other.ceiling is None
            else min(self.ceiling, other.ceiling),
            self.mix,
        )

    @property
    def measured_rate(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    @property
    def rate(self) -> float:
        """The measured rate, capped by what the cores allow beside the step."""
        if self.ceiling is None:
            return self.measured_rate
        return min(self.measured_rate, self.ceiling)

    @property
    def step_cores(self) -> float:
        return self.step_cpu_s / self.step_s if self.step_s > 0 else 0.0

    def epoch_rate(self, epoch: int | None) -> float:
        """Samples/s over a whole epoch of `epoch` samples, the next epoch's start included."""
        if not epoch or not self.rate:
            return self.rate
        return epoch / ((self.restart_s or 0.0) + epoch / self.rate)

    def as_dict(self, epoch: int | None) -> dict[str, Any]:
        return {
            "setting": self.setting.label(),
            "loader_kwargs": self.setting.loader_kwargs(),
            "shards": self.setting.shards,
            "samples": self.samples,
            "seconds": round(self.seconds, 3),
            "samples_per_s": round(self.rate, 1),
            "measured_samples_per_s": round(self.measured_rate, 1),
            "ceiling_samples_per_s": None if self.ceiling is None else round(self.ceiling, 1),
            "step_s_per_sample": round(self.step_s, 6),
            "step_cores": round(self.step_cores, 2),
            "load_cpu_s_per_sample": round(self.load_cpu_s, 6),
            "epoch_samples_per_s": round(self.epoch_rate(epoch), 1),
            "start_s": round(self.start_s, 3),
            "restart_s": None if self.restart_s is None else round(self.restart_s, 3),
            "data_wait_share": round(self.wait_share, 4),
            "cpu_per_worker": round(self.cpu_per_worker, 3),
            "cache": self.cache,
            "measurements": self.measurements,
            "batch_mix": self.mix,
        }


class EndlessShuffle(torch.utils.data.Sampler):
    """Indices of one random permutation after another; its position carries over."""

    def __init__(self, size: int, seed: int = 0) -> None:
        self.size, self.seed, self.rng = size, seed, random.Random(seed)
        self.order: list[int] = []
        self.pos = 0
        self.ending = False  # set: the current pass ends, as an epoch does

    def __iter__(self) -> Iterator[int]:
        while not self.ending:
            if self.pos >= len(self.order):
                self.order = list(range(self.size))
                self.rng.shuffle(self.order)
                self.pos = 0
            self.pos += 1
            yield self.order[self.pos - 1]

    def replay(self) -> None:
        """Start the next pass at the first permutation again: its first len() indices are
        distinct, and every cold setting reads the same samples in the same order."""
        self.rng, self.order, self.pos = random.Random(self.seed), [], 0


def _endless(work: Workload) -> EndlessShuffle | None:
    """The shuffled endless order of a map-style dataset (None: an IterableDataset)."""
    if isinstance(work.dataset, torch.utils.data.IterableDataset):
        return None
    return EndlessShuffle(len(work.dataset))


def batch_len(batch: Any, default: int) -> int:
    if isinstance(batch, torch.Tensor) and batch.dim():
        return int(batch.shape[0])
    if isinstance(batch, (list, tuple)) and batch:
        return (
            batch_len(batch[0], len(batch))
            if not isinstance(batch[0], (str, bytes))
            else len(batch)
        )
    if isinstance(batch, dict) and batch:
        return batch_len(next(iter(batch.values())), default)
    return default


class Runner:
    def __init__(
        self,
        files: Workload,
        shards: Workload | None,
        batch_size: int,
        step_s: float,
        cold: bool,
        step: Callable[[Any], Any] | None = None,
        ceiling: Callable[[Result], float | None] = lambda r: None,
    ) -> None:
        self.files, self.shards = files, shards
        self.batch_size, self.step_s, self.cold = batch_size, step_s, cold
        # the user's step, run on every batch as training does, so its CPU and memory compete
        # with the workers' (None: a sleep of step_s per batch, or none)
        self.step = step
        self.ceiling = ceiling
        # one endless shuffle per map-style dataset, of its own length: the user's shards
        # dataset may hold another number of samples than the files'
        files_order = _endless(files)
        self.samplers = {
            False: files_order,
            True: files_order if shards is None else _endless(shards),
        }
        self.cache = "cold" if cold else "as found"

    def _work(self, shards: bool) -> Workload:
        return self.shards if shards and self.shards is not None else self.files

    def dataset(self, shards: bool) -> Any:
        """The dataset a setting with `shards` reads."""
        return self._work(shards).dataset

    def _length(self, shards: bool) -> int | None:
        """Samples in one pass of the files or the shards (None: an IterableDataset, whose
        own end marks the pass)."""
        dataset = self._work(shards).dataset
        if isinstance(dataset, torch.utils.data.IterableDataset):
            return None
        return len(dataset)

    def loader(self, setting: Setting, sampler: Any = "endless") -> torch.utils.data.DataLoader:
        work = self._work(setting.shards)
        return torch.utils.data.DataLoader(
            work.dataset,
            batch_size=self.batch_size,
            # an IterableDataset has no shuffle (None) and first_pass passes it no order
            sampler=self.samplers[setting.shards] if sampler == "endless" else sampler,
            collate_fn=work.collate_fn,
            **setting.loader_kwargs(),
        )

    def first_pass(self, setting: Setting, limit_s: float, shards: bool = False) -> dict:
        """Read the dataset once (bounded): the settings after it read a warm cache."""
        length = self._length(shards)
        order = None if length is None else list(range(length))
        loader = self.loader(Setting(setting.num_workers, setting.prefetch_factor, shards=shards),
                             sampler=order)  # fmt: skip
        start, samples, complete = time.monotonic(), 0, True
        try:
            for batch in loader:
                samples += batch_len(batch, self.batch_size)
                if time.monotonic() - start > limit_s:
                    complete = False
                    break
        except Exception as exc:  # the user's dataset: any failure, one line
            raise UserError(f"reading the dataset failed: {describe_failure(exc)}") from None
        if not complete:  # one pass cut short leaves the cache partly warm, whatever follows
            self.cache = "partly warm"
        elif self.cache != "partly warm":
            self.cache = "warm"
        return {"samples": samples, "seconds": round(time.monotonic() - start, 2),
                "complete": complete, "shards": shards}  # fmt: skip

    def measure(self, setting: Setting, slot_s: float) -> Result:
        if not self.cold:
            result = self._run(setting, slot_s, epoch=None, restart=True)
        else:
            end = time.monotonic() + slot_s
            epoch = self._length(setting.shards)
            result = self._run(setting, slot_s, epoch, restart=True)
            while (left := end - time.monotonic()) > MIN_COLD_PASS:
                result = result.merge(self._run(setting, left, epoch, restart=False))
        result.ceiling = self.ceiling(result)
        return result

    def _step(self, batch: Any, setting: Setting) -> tuple[float, float]:
        """Run the step on one batch: (wall seconds, CPU seconds of this process)."""
        c0, w0 = time.process_time(), time.monotonic()
        if self.step is not None:
            try:
                self.step(batch)
            except Exception as exc:  # the user's step: any failure, one line
                raise UserError(
                    f"the step failed under {setting.label()}: {describe_failure(exc)}"
                ) from None
        elif self.step_s:
            time.sleep(self.step_s)
        return time.monotonic() - w0, time.process_time() - c0

    def _run(self, setting: Setting, slot_s: float, epoch: int | None, restart: bool) -> Result:
        """One measurement. Cold: after a cache drop, stopped at the end of one pass (`epoch`
        samples, given only when cold)."""
        loader = self.loader(setting)
        if self.cold:
            if (order := self.samplers[setting.shards]) is not None:
                order.replay()
            make_cold([os.getpid()])
        t0 = time.monotonic()
        cpu0 = time.process_time(), children_cpu()
        it = iter(loader)
        samples = 0
        wait = step = step_cpu = load_cpu = 0.0
        stepping = self.step is not None or self.step_s > 0
        try:
            batch = next(it)
            first = batch_len(batch, self.batch_size)  # worker start, timed apart
            t1 = time.monotonic()
            deadline = t0 + max(slot_s * 0.8, (t1 - t0) + 0.5)
            while (now := time.monotonic()) < deadline:
                if epoch is not None and first + samples >= epoch:
                    break
                if stepping:
                    wall, cpu_s = self._step(batch, setting)
                    step, step_cpu = step + wall, step_cpu + cpu_s
                    now = time.monotonic()
                c0 = time.process_time()
                try:
                    batch = next(it)
                except StopIteration:  # an IterableDataset's epoch ended
                    if self.cold:  # what follows would come from the cache
                        break
                    it = iter(loader)
                    batch = next(it)
                wait += time.monotonic() - now
                load_cpu += time.process_time() - c0
                samples += batch_len(batch, self.batch_size)
            end = time.monotonic()
            if not samples:  # the pass was a single batch: count it, worker start and all
                samples, t1 = first, t0
            cpu = self._cpu(it, setting, cpu0, end - t0)
            restart_s = None
            if restart and setting.num_workers:
                self._end_epoch(it, setting)
                r0 = time.monotonic()
                it = iter(loader)
                next(it)
                restart_s = time.monotonic() - r0
        except StopIteration:
            raise UserError("the dataset yielded no batch: is it empty?") from None
        except Exception as exc:  # the user's dataset: any failure, one line
            raise UserError(
                f"reading the dataset failed under {setting.label()}: {describe_failure(exc)}"
            ) from None
        finally:
            _shutdown(it, setting, final=True)
        counted = max(samples, 1)
        if setting.num_workers:  # the workers' CPU over the whole run, first batch included
            load_cpu = cpu * setting.num_workers * (end - t0) / (first + samples)
        else:
            load_cpu /= counted
        return Result(
            setting,
            samples,
            end - t1,
            t1 - t0,
            restart_s,
            wait / max(wait + step, 1e-9),
            cpu,
            self.cache,
            step_s=step / counted,
            step_cpu_s=step_cpu / counted,
            load_cpu_s=load_cpu,
        )

    def _end_epoch(self, it: Any, setting: Setting) -> None:
        """Finish the pass as an epoch ends (map-style: the sampler stops and the batches in
        flight are collected), so the next iter() is timed as the next epoch's start."""
        order = self.samplers[setting.shards]
        if order is not None:
            order.ending = True
            try:
                for _ in it:
                    pass
            finally:
                order.ending = False
        _shutdown(it, setting)

    def _cpu(self, it: Any, setting: Setting, cpu0: tuple[float, float], elapsed: float) -> float:
        """Cores per worker: the live workers' CPU from /proc, plus that of the workers that
        ended during the measurement (an iterable dataset's epoch that ends starts new ones,
        unless persistent), which waiting for them added to this process's children."""
        if not setting.num_workers:
            return (time.process_time() - cpu0[0]) / max(elapsed, 1e-9)
        used = children_cpu() - cpu0[1]
        for worker in getattr(it, "_workers", []):
            try:
                fields = Path(f"/proc/{worker.pid}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, AttributeError, IndexError):
                continue
            used += (int(fields[11]) + int(fields[12])) / TICKS
        return used / setting.num_workers / max(elapsed, 1e-9)


def children_cpu() -> float:
    """CPU seconds of this process's children that have ended and been waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _shutdown(it: Any, setting: Setting, final: bool = False) -> None:
    """End a non-persistent iterator's workers now (persistent ones live until the end)."""
    if (final or not setting.persistent_workers) and hasattr(it, "_shutdown_workers"):
        it._shutdown_workers()
