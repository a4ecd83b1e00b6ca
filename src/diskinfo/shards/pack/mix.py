"""How mixed a batch read from a fresh pack will be, beside a fully shuffled loader: written to
the manifest and said by `diskinfo pack`, so the cost of a coarser shuffle is seen before
training, not after.

The prediction runs ShardDataset's own stream (shard order, dealing to readers, shuffle
buffer: its training defaults) on what the pack's plan already knows, without reading a
shard: with classes, the distinct classes per batch (`shard_mixing`); without, the rank
correlation between the order a reader hands samples out in and their order in SRC (sorted
by key): 1 is SRC's order unchanged, about 0 is no trace of it.
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from diskinfo.shards.mixing import mixing
from diskinfo.shards.stream import SHUFFLE_BUFFER, ShardStream

BATCH = 32  # as the docs' examples train
WORKERS = 2  # DataLoader workers on one rank


def predict(
    shards: list[Path],
    bounds: list[tuple[int, int]],
    labels: Sequence[int] | None,
    ranks: Sequence[int],
) -> dict:
    """The manifest's `mixing` for the samples packed into `shards`, shard i holding the
    positions bounds[i]; by position: `labels` (None: no classes) and `ranks`, each sample's
    place in SRC's key order. Views of them, not copies: a pack's memory stays flat."""
    ds = _Defaults([str(p) for p in shards])
    samples = bounds[-1][1] if bounds else 0
    batch = max(1, min(BATCH, samples // (2 * WORKERS)))  # a tiny set: two batches per worker
    out: dict[str, Any] = {
        "batch_size": batch,
        "num_workers": WORKERS,
        "shuffle_buffer": ds.shuffle_buffer,
    }
    if labels is not None:
        found = mixing(ds, batch, WORKERS, labels=[_view(labels, a, b) for a, b in bounds])
        out.update(
            distinct_classes=round(found.distinct, 2),
            shuffled_loader=round(found.shuffled, 2),
            ratio=round(found.ratio, 3),
        )
    else:
        groups = [_view(ranks, a, b) for a, b in bounds]
        out["order_correlation"] = round(order_correlation(ds, groups), 3)
    return out


def in_words(mix: dict[str, Any], of: str = "", order: str = "SRC's key order") -> str:
    """A `mixing` (pack's manifest, tune's batch mix) in one line: what a batch will hold
    beside a fully shuffled loader; `of`: whose mix it is, `order`: the order a correlation
    is with."""
    n = mix["num_workers"]
    setup = (
        f"batches of {mix['batch_size']} from {f'{n} workers' if n else 'the main process'}, "
        f"shuffle buffer {mix['shuffle_buffer']}"
    )
    head = f"batch mix of {of}" if of else "batch mix"
    if "distinct_classes" in mix:
        return (
            f"{head}: {mix['distinct_classes']:.1f} distinct classes per batch, a fully "
            f"shuffled loader {mix['shuffled_loader']:.1f} ({mix['ratio']:.0%} of it; {setup})"
        )
    return (
        f"{head}: order correlation with {order} {mix['order_correlation']:+.2f} "
        f"(0: no trace of it, 1: that order; {setup})"
    )


def _view(values: Sequence[int], a: int, b: int) -> Sequence[int]:
    return memoryview(values)[a:b] if isinstance(values, array) else values[a:b]


class _Defaults(ShardStream):
    """ShardDataset's training defaults on one rank, without torch."""

    def __init__(self, shards: list[str]) -> None:
        self.shards, self.counts, self.even = shards, None, None
        self.shuffle_shards, self.shuffle_buffer, self.seed = True, SHUFFLE_BUFFER, 0
        self.epoch = self.passes = 0
        self.world_size = 1


def order_correlation(ds: ShardStream, ranks: list[Sequence[int]], workers: int = WORKERS) -> float:
    """Spearman's rho between each reader's output position and SRC rank, averaged over the
    readers (`workers` DataLoader workers on one rank) weighted by their sample counts."""
    total = weight = 0.0
    workers = max(1, workers)
    for worker in range(workers):
        seen = array("I", ds.stream(ds.epoch, 0, 1, worker, workers, ranks.__getitem__))
        if len(seen) > 1:
            total += len(seen) * _spearman(seen)
            weight += len(seen)
    return total / weight if weight else 0.0


def _spearman(values: Sequence[int]) -> float:
    """Rank correlation of `values` (distinct, not negative) with their positions. Ranks by
    counting, not sorting: arrays of 1 and 4 bytes per value, not lists of objects."""
    n = len(values)
    present = bytearray(max(values) + 1)
    for v in values:
        present[v] = 1
    rank = array("I", itertools.accumulate(present, initial=0))  # values below v
    d2 = sum((i - rank[v]) ** 2 for i, v in enumerate(values))
    return 1.0 - 6.0 * d2 / (n * (n * n - 1))
