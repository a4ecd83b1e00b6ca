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

from pathlib import Path
from typing import Any

from diskinfo.pack.scan import Sample
from diskinfo.shard_mixing import mixing
from diskinfo.shard_stream import SHUFFLE_BUFFER, ShardStream

BATCH = 32  # as the docs' examples train
WORKERS = 2  # DataLoader workers on one rank


def predict(shards: list[Path], groups: list[list[Sample]], in_src: list[Sample]) -> dict:
    """The manifest's `mixing`, for `groups` packed into `shards`; `in_src`: the samples in
    SRC's key order."""
    ds = _Defaults([str(p) for p in shards])
    samples = sum(len(g) for g in groups)
    batch = max(1, min(BATCH, samples // (2 * WORKERS)))  # a tiny set: two batches per worker
    out: dict[str, Any] = {
        "batch_size": batch,
        "num_workers": WORKERS,
        "shuffle_buffer": ds.shuffle_buffer,
    }
    if all(s.label is not None for group in groups for s in group):
        found = mixing(ds, batch, WORKERS, labels=[[s.label for s in g] for g in groups])
        out.update(
            distinct_classes=round(found.distinct, 2),
            shuffled_loader=round(found.shuffled, 2),
            ratio=round(found.ratio, 3),
        )
    else:
        place = {id(s): i for i, s in enumerate(in_src)}
        ranks = [[place[id(s)] for s in group] for group in groups]
        out["order_correlation"] = round(order_correlation(ds, ranks), 3)
    return out


class _Defaults(ShardStream):
    """ShardDataset's training defaults on one rank, without torch."""

    def __init__(self, shards: list[str]) -> None:
        self.shards, self.counts, self.even = shards, None, None
        self.shuffle_shards, self.shuffle_buffer, self.seed = True, SHUFFLE_BUFFER, 0
        self.epoch = self.passes = 0
        self.world_size = 1


def order_correlation(ds: ShardStream, ranks: list[list[int]], workers: int = WORKERS) -> float:
    """Spearman's rho between each reader's output position and SRC rank, averaged over the
    readers (`workers` DataLoader workers on one rank) weighted by their sample counts."""
    total = weight = 0.0
    workers = max(1, workers)
    for worker in range(workers):
        seen = list(ds.stream(ds.epoch, 0, 1, worker, workers, ranks.__getitem__))
        if len(seen) > 1:
            total += len(seen) * _spearman(seen)
            weight += len(seen)
    return total / weight if weight else 0.0


def _spearman(values: list[int]) -> float:
    """Rank correlation of `values` with their positions (distinct values)."""
    n = len(values)
    order = sorted(range(n), key=values.__getitem__)
    rank = [0] * n
    for r, i in enumerate(order):
        rank[i] = r
    d2 = sum((i - r) ** 2 for i, r in enumerate(rank))
    return 1.0 - 6.0 * d2 / (n * (n * n - 1))
