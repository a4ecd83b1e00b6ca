"""The num_workers advice: the cores the training step keeps busy, and the workers to reach.

Both the verdict's fix ("num_workers 0 -> 2: ...") and the number it names
(`Verdict.workers_target`) come from `_workers`, so the words may change without the run's
summary losing track of which fix the run applied; `diskinfo tune` says the same as
`step_saturates` when the step alone fills the cores.
"""

from __future__ import annotations

import re

from diskinfo import thresholds as t
from diskinfo.analyse.signals import Signals
from diskinfo.cores import whole


def step_cores(s: Signals) -> float | None:
    """Cores the training step itself keeps busy, every rank's together: the training
    processes' CPU outside their data-wait. With num_workers=0 the data-wait is loading in
    the same process, one core, which is taken off first (None: no loop figures)."""
    loader = s.loader
    if loader is None or s.main_cpu is None or loader.wait_share >= 1:
        return None
    main = s.main_cpu / 100.0
    if not loader.num_workers:
        main -= loader.wait_share
    return max(0.0, main / (1 - loader.wait_share)) * s.ranks


def step_saturates(step: float, cores: float) -> str | None:
    """The plain words when the step alone fills the cores (tune says the same)."""
    if not cores or step < t.STEP_SATURATED_SHARE * cores:
        return None
    return f"more workers will not help: the step uses {step:.1f} of {cores:g} cores"


def _workers(s: Signals) -> tuple[int | None, int, int, int] | str | None:
    """(W, N, ranks, cores): the loop's num_workers now (None: not known), the num_workers to
    reach, the training processes that each get N and the container's cores; or the words
    for a step that alone fills the cores; None when the loaders already have every core or
    every core is busy (more workers would only compete). Each rank of a DDP run has its own
    workers: N is per rank, and all ranks' share the cores."""
    cores = whole(s.cpu_cores) if s.cpu_cores else 0
    ranks = s.ranks
    current = s.loader.num_workers if s.loader is not None else None
    if current is None and s.workers:
        current, ranks = s.workers, 1  # worker processes counted: every rank's together
    if cores and current is not None and current * ranks >= cores:
        return None
    if s.cpu_busy is not None and s.cpu_busy >= t.CPU_SATURATED_PCT and current:
        return None  # every core is busy: more workers share the same cores
    suggest = max(2, 2 * (current or 0))
    if cores:
        suggest = min(suggest, cores // ranks)
    if suggest < 1 or (current is not None and suggest <= current):
        return None
    step = step_cores(s)
    if step is not None and (full := step_saturates(step, cores)) is not None:
        return full  # workers would take their CPU from the step: no gain to promise
    return current, suggest, ranks, cores


def workers_target(s: Signals) -> int | None:
    """N of the num_workers fix this interval's figures give, None when they give none: the
    verdict carries it, so a run's summary can tell the fix applied without reading the
    words back."""
    plan = _workers(s)
    return plan[1] if isinstance(plan, tuple) else None


def workers_fix(s: Signals) -> str | None:
    """num_workers W -> N, with the cores the loaders use and the cores the container has."""
    plan = _workers(s)
    if not isinstance(plan, tuple):
        return plan
    current, suggest, ranks, cores = plan
    busy = f"{s.loading_cores:.1f} of {cores or '?'} cores"
    if any(p.role == "worker" for p in s.procs):
        load = f"{busy} are busy loading"
    else:  # the main process's CPU is its step's too: not all of it is loading
        load = f"loading and the step take turns in the training process ({busy} busy)"
    now = str(current) if current is not None else "?"
    each = f" in each of the {ranks} training processes" if ranks > 1 else ""
    return f"num_workers {now} -> {suggest}{each}: {load}"


_WORKERS_TARGET = re.compile(r"num_workers (?:\d+|\?) -> (\d+)")


def workers_target_in_words(fix: str) -> int | None:
    """N of a num_workers fix read from its words: only for records written before verdicts
    carried `workers_target`."""
    found = _WORKERS_TARGET.match(fix)
    return int(found.group(1)) if found else None
