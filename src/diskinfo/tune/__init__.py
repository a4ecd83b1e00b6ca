"""`diskinfo tune MODULE:FACTORY`: choose DataLoader settings by measuring the user's dataset.

Which of the verdicts' fixes helps (more workers, a deeper prefetch, persistent workers,
pinned memory, packed shards) depends on the data and the machine; this measures each on
the user's own Dataset within a time budget and names the best with its gain over the
current setting. `grid` says what is tried, `runner` how one setting is measured, `mix`
how mixed each setting's batches are, `table` how the best is chosen and shown, `cache` how
the page cache is made cold.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from diskinfo.errors import UserError
from diskinfo.tune import grid, mix
from diskinfo.tune.cache import can_drop
from diskinfo.tune.cap import for_runner, saturated
from diskinfo.tune.grid import Setting
from diskinfo.tune.load import accepts_shards, call_factory, load_object
from diskinfo.tune.runner import Result, Runner
from diskinfo.tune.table import TIE, best, gain

MIN_SLOT = 1.0  # seconds: below this, worker start dominates what is measured
CONFIRM = 3  # the leading settings are measured a second time, interleaved, and pooled
DEFAULT_BATCH = 64
MIN_MIX_S = 10.0  # seconds the batch mix may spend reading labels, at least


@dataclass
class Options:
    factory: str
    budget: float = 120.0
    batch_size: int | None = None
    collate: str | None = None
    pack: str | None = None
    cold: bool = False
    step_ms: float = 0.0
    step: str | None = None  # MODULE:FUNCTION, called with each batch as the training step
    step_cpu: float | None = None  # cores the simulated step keeps busy (with step_ms)
    max_workers: int | None = None
    current: str | None = None
    exhaustive: bool = False


@dataclass
class Outcome:
    results: list[Result]
    current: Result
    chosen: Result
    epoch: int | None
    batch_size: int
    first_passes: list[dict] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        g = gain(self.chosen, self.current, self.epoch)
        return {
            **self.meta,
            "batch_size": self.batch_size,
            "epoch_samples": self.epoch,
            "first_passes": self.first_passes,
            "current": self.current.setting.label(),
            "best": self.chosen.setting.label(),
            "best_loader_kwargs": self.chosen.setting.loader_kwargs(),
            # the table's figure; null where the current setting read nothing (no ratio)
            "gain_over_current": round(g, 3) if math.isfinite(g) else None,
            "results": [r.as_dict(self.epoch) for r in self.results],
        }

    @property
    def step_cores(self) -> float:
        """Cores the step keeps busy: as given (--step-cpu), else as the user's step ran under
        the current setting (with num_workers=0 no worker competes with it)."""
        given = self.meta.get("step_cpu")
        return given if given is not None else self.current.step_cores

    @property
    def saturated(self) -> str | None:
        """'more workers will not help: the step uses N of M cores', or None."""
        return saturated(self.step_cores, self.meta.get("cores") or grid.cores())


def parse_current(text: str) -> Setting:
    """'num_workers=2,prefetch_factor=4,persistent_workers=true' -> Setting."""
    values: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in ("num_workers", "prefetch_factor", "persistent_workers",
                                  "pin_memory"):  # fmt: skip
            raise UserError(f"--current: expected KEY=VALUE of the DataLoader, got {part!r}")
        if key in ("num_workers", "prefetch_factor"):
            if not value.isdigit():
                raise UserError(f"--current: {key} must be a whole number, got {value!r}")
            values[key] = int(value)
        elif value.lower() in ("1", "true", "yes", "0", "false", "no"):
            values[key] = value.lower() in ("1", "true", "yes")
        else:
            raise UserError(f"--current: {key} must be true or false, got {value!r}")
    return grid.normal(Setting(**{"num_workers": 0, **values}))


def tune(opts: Options, tick: Callable[[float, str], None] = lambda share, text: None) -> Outcome:
    import torch

    for flag, value, low in (
        ("--budget", opts.budget, 1e-9),
        ("--batch-size", opts.batch_size, 1),
        ("--max-workers", opts.max_workers, 0),
        ("--step-ms", opts.step_ms, 0),
        ("--step-cpu", opts.step_cpu, 0),
    ):
        if value is not None and value < low:
            raise UserError(f"{flag} must be at least {low:g}, got {value:g}")
    if opts.cold and not can_drop():
        raise UserError("--cold needs root: it drops the page cache (/proc/sys/vm/drop_caches)")
    if opts.step and opts.step_ms:
        raise UserError("--step runs your step; --step-ms simulates one: give one of them")
    if opts.step_cpu is not None and not opts.step_ms:
        raise UserError("--step-cpu is the simulated step's CPU: it needs --step-ms")
    name, factory = load_object(opts.factory)
    step = load_object(opts.step, "FUNCTION")[1] if opts.step else None
    files = call_factory(name, factory)
    collate = load_object(opts.collate, "FUNCTION")[1] if opts.collate else files.collate_fn
    files.collate_fn = collate
    shards = None
    if opts.pack:
        from diskinfo.shards import shardlist

        shardlist.resolve(opts.pack)  # what ShardDataset takes; a one-line error here if none
        if not accepts_shards(factory):
            raise UserError(
                f"--pack needs {name} to take shards=DEST and return a dataset reading them "
                "(see docs/tune.md)"
            )
        shards = call_factory(name, factory, shards=str(opts.pack))
        shards.collate_fn = collate
    batch = opts.batch_size or files.batch_size or DEFAULT_BATCH
    if opts.current:
        current = parse_current(opts.current)
    elif files.current:
        current = grid.normal(Setting(**files.current))
    else:
        current = Setting(0)
    gpu = torch.cuda.is_available()
    if not gpu:
        current = replace(current, pin_memory=False)
    cores = grid.cores()
    top = opts.max_workers or cores
    try:
        epoch: int | None = len(files.dataset)
    except TypeError:
        epoch = None
    simulated = None
    if opts.step_ms:  # a sleep takes no core: its cap says how many the real step would
        simulated = for_runner(cores, opts.step_cpu or 0.0, opts.step_ms / 1000 / batch)
    runner = Runner(files, shards, batch, opts.step_ms / 1000, opts.cold, step, simulated or
                    (lambda r: None))  # fmt: skip
    start = time.monotonic()

    def left() -> float:
        return opts.budget - (time.monotonic() - start)

    first_passes = []
    if not opts.cold:
        warm = Setting(top, 2 if top else None)
        for use_shards in (False, True) if shards else (False,):
            tick((time.monotonic() - start) / opts.budget, "first pass (warms the cache)")
            first_passes.append(runner.first_pass(warm, opts.budget / 4, use_shards))
    measured: dict[Setting, Result] = {}

    def measure(settings: list[Setting], planned: int) -> None:
        todo = [s for s in dict.fromkeys(settings) if s not in measured]
        for i, s in enumerate(todo):
            slot = max(MIN_SLOT, left() / max(planned - i, 1))
            tick((time.monotonic() - start) / opts.budget, f"{len(measured) + 1}: {s.label()}")
            measured[s] = runner.measure(s, slot)

    if opts.exhaustive:
        everything = [*grid.full(top, gpu, shards is not None), current]
        measure(everything, len(set(everything)) + CONFIRM)
    else:
        stage1 = grid.first_stage(top, current)
        more = len(grid.variants(Setting(1, 2), gpu, shards is not None)) + 1
        measure(stage1, len(stage1) + more + CONFIRM)
        lead = best(list(measured.values()), epoch)
        tries = grid.variants(lead.setting, gpu, shards is not None)
        measure(tries, len(tries) + 1 + CONFIRM)
        bar = lead.epoch_rate(epoch) * (1 + TIE)
        helped = [measured[s].setting for s in tries if measured[s].epoch_rate(epoch) > bar]
        merged = grid.combine(lead.setting, helped)
        if merged is not None:
            measure([merged], 1 + CONFIRM)
    # one measurement of a second or two can crown a setting by luck (a neighbour's burst of
    # I/O): the leaders, and the cheaper setting `best` would pick within TIE of them, are
    # measured again, interleaved, and their figures pooled; a pick that only the pooling
    # brought up is measured again too, so what is recommended never rests on one reading
    confirmed: set[Setting] = set()

    def confirm(settings: list[Setting]) -> None:
        todo = [s for s in dict.fromkeys(settings) if s not in confirmed]
        for i, s in enumerate(todo):
            slot = max(MIN_SLOT, left() / (len(todo) - i))
            tick((time.monotonic() - start) / opts.budget, f"confirming {s.label()}")
            measured[s] = measured[s].merge(runner.measure(s, slot))
            confirmed.add(s)

    leaders = sorted(measured.values(), key=lambda r: -r.epoch_rate(epoch))[:CONFIRM]
    # the current setting too: its rate is the denominator of every gain tune states
    confirm([r.setting for r in leaders] + [best(list(measured.values()), epoch).setting,
             current])  # fmt: skip
    confirm([best(list(measured.values()), epoch).setting])
    results = list(measured.values())
    spent = time.monotonic() - start
    # after the measurements, so its reads warm no cache for them; on a large set on slow
    # storage, reading every tar header for the labels is given a quarter of the budget
    mix.annotate(results, runner, max(MIN_MIX_S, opts.budget / 4))
    meta = {
        "factory": name,
        "budget_s": opts.budget,
        "spent_s": round(spent, 1),
        "search": "exhaustive" if opts.exhaustive else "staged",
        "cache": "cold: page cache, dentries and inodes dropped before each setting"
        if opts.cold
        else f"{runner.cache} after a first pass over the data",
        "gpu": gpu,
        "cores": cores,
        "step_ms": opts.step_ms,
        "step": opts.step,
        "step_cpu": opts.step_cpu,
        "pack": str(Path(opts.pack).resolve()) if opts.pack else None,
    }
    outcome = Outcome(
        results, measured[current], best(results, epoch), epoch, batch, first_passes, meta
    )
    meta["step_cores"] = round(outcome.step_cores, 2)
    meta["saturated"] = outcome.saturated
    return outcome
