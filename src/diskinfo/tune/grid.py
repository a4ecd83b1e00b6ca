"""The DataLoader settings `diskinfo tune` tries, and the order it tries them in.

The grid: num_workers on a ladder 0, 1, 2, 4, 8, ... up to the CPU cores (the cores
themselves included), prefetch_factor 2 (PyTorch's default) and 4, persistent_workers off
and on, pin_memory off and on where a GPU is present, and files or packed shards when a
pack is given. The staged search measures the ladder first, then each other option on the
best rung, then the options that helped together; `--exhaustive` measures every point.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, replace

from diskinfo import cores as container_cores

PREFETCH = (2, 4)


@dataclass(frozen=True, order=True)
class Setting:
    num_workers: int
    prefetch_factor: int | None = None  # None with num_workers 0: PyTorch refuses any other
    persistent_workers: bool = False
    pin_memory: bool = False
    shards: bool = False

    def label(self) -> str:
        parts = [f"num_workers={self.num_workers}"]
        if self.num_workers:
            parts.append(f"prefetch_factor={self.prefetch_factor}")
            if self.persistent_workers:
                parts.append("persistent_workers=True")
        if self.pin_memory:
            parts.append("pin_memory=True")
        if self.shards:
            parts.append("shards")
        return " ".join(parts)

    def loader_kwargs(self) -> dict:
        """Keyword arguments for torch.utils.data.DataLoader."""
        kwargs = asdict(self)
        del kwargs["shards"]
        if not self.num_workers:
            del kwargs["prefetch_factor"], kwargs["persistent_workers"]
        return kwargs

    def cost(self) -> tuple:
        """Cheaper first: fewer processes, less memory held in flight."""
        return (self.num_workers, self.prefetch_factor or 0, self.pin_memory, self.shards)


def normal(setting: Setting) -> Setting:
    """Worker options mean nothing without workers: one point for num_workers=0."""
    if setting.num_workers == 0:
        return replace(setting, prefetch_factor=None, persistent_workers=False)
    return replace(setting, prefetch_factor=setting.prefetch_factor or 2)


def cores() -> int:
    """The ladder's top: the cores this container may use, its CPU quota included (the
    verdict's num_workers advice stops there too)."""
    return container_cores.whole(container_cores.available())


def ladder(top: int) -> list[int]:
    """0, 1, 2, 4, ... below top, then top itself."""
    rungs = [0, 1]
    while rungs[-1] * 2 < top:
        rungs.append(rungs[-1] * 2)
    return sorted({r for r in rungs if r <= top} | {top})


def full(top: int, gpu: bool, shards: bool) -> list[Setting]:
    points = itertools.product(
        ladder(top), PREFETCH, (False, True), (False, True) if gpu else (False,),
        (False, True) if shards else (False,),
    )  # fmt: skip
    return sorted({normal(Setting(*p)) for p in points})


def first_stage(top: int, current: Setting) -> list[Setting]:
    """The num_workers ladder at PyTorch's defaults, and the current setting."""
    rungs = [normal(Setting(w)) for w in ladder(top)]
    return rungs + ([current] if current not in rungs else [])


def variants(best: Setting, gpu: bool, shards: bool) -> list[Setting]:
    """One option changed at a time on the best rung."""
    out = []
    if best.num_workers:
        out.append(replace(best, prefetch_factor=4 if best.prefetch_factor == 2 else 2))
        out.append(replace(best, persistent_workers=not best.persistent_workers))
    if gpu:
        out.append(replace(best, pin_memory=not best.pin_memory))
    if shards:
        out.append(replace(best, shards=not best.shards))
    return out


def combine(best: Setting, helped: list[Setting]) -> Setting | None:
    """All options that helped on their own, at once (None when fewer than two helped)."""
    if len(helped) < 2:
        return None
    merged = best
    for s in helped:
        for field, value in asdict(s).items():
            if value != getattr(best, field):
                merged = replace(merged, **{field: value})
    return merged
