"""What the cores allow a setting once the training step takes its share of them.

tune reads the loader with a step per batch: the user's own (`--step`), whose CPU competes
with the workers' as in training, or a sleep (`--step-ms`), which leaves every core to the
workers. A sleeping step made workers look free: 1.81x promised, x1.02 delivered on two
cores where the real step kept both busy. So each setting's rate is capped by the cores the
step leaves: while the step runs on `step_cores` of `cores`, loading can hide only
(cores - step_cores) x step time of CPU per sample behind it; the rest of its CPU adds to
the time per sample. That excess is counted as serial, not shared out over the workers: a
step whose threads meet at every operator stalls as a whole when a worker takes one of its
cores, and on the walk above the shared-out model still promised x1.3.
"""

from __future__ import annotations

from collections.abc import Callable

from diskinfo.analyse.workers import step_saturates
from diskinfo.tune.runner import Result


def ceiling(r: Result, cores: float, step_cores: float, step_s: float) -> float | None:
    """Samples/s the loop can reach with the step at `step_cores` for `step_s` per sample
    (None: no step, nothing to cap by). Without workers loading and the step take turns,
    which the measurement already shows: nothing is hidden behind the step."""
    if step_s <= 0:
        return None
    hidden = max(0.0, cores - step_cores) * step_s if r.setting.num_workers else 0.0
    per_sample = step_s + max(0.0, r.load_cpu_s - hidden)
    return 1.0 / per_sample


def for_runner(cores: float, step_cpu: float, step_s: float) -> Callable[[Result], float | None]:
    """The runner's cap for a simulated step of `step_s` per sample at `step_cpu` cores
    (`--step-ms`, `--step-cpu`). The user's own step (`--step`) needs none: its CPU competed
    with the workers' in the measurement itself."""
    return lambda r: ceiling(r, cores, step_cpu, step_s)


def saturated(step_cores: float, cores: float) -> str | None:
    """The verdict's words when the step alone fills the cores (one sentence, one rule)."""
    return step_saturates(step_cores, cores)
