"""How mixed a ShardDataset's batches are, beside a fully shuffled loader (every batch a
uniform draw from the whole set): the one home of the "mix" of a batch, for the reader
(`ShardDataset.mixing`), the writer (`predict`, into the manifest and `diskinfo pack`'s
summary) and `diskinfo tune` (each measured setting's mix).

Shards trade random reads for a coarser shuffle: a batch mixes only the shards one reader has
open and what its shuffle buffer holds. The mix is predicted without reading a sample's bytes:
the dataset's own stream (shard order, dealing, even=, shuffle buffer, all seeded) is run on
each shard's labels (read by `dataset.shard_labels`, or known from a pack's plan). A
DataLoader's batch comes whole from one worker, so batches are cut from each reader's stream;
only full batches are counted, as with drop_last. With classes: the distinct classes per
batch; without: the rank correlation between the order a reader hands samples out in and
their order in SRC (sorted by key): 1 is SRC's order unchanged, about 0 is no trace of it.
"""

from __future__ import annotations

import itertools
import math
from array import array
from collections import Counter
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from diskinfo.shards.stream import SHUFFLE_BUFFER, ShardStream

BATCH = 32  # a pack's prediction: as the docs' examples train
WORKERS = 2  # DataLoader workers on one rank


class Mixing(NamedTuple):
    distinct: float  # classes per batch, averaged over this loader's full batches
    shuffled: float  # the same for a fully shuffled loader over the same samples
    batches: int  # full batches counted

    @property
    def ratio(self) -> float:
        return self.distinct / self.shuffled if self.shuffled else 1.0


def mixing(
    ds: ShardStream,
    batch_size: int,
    num_workers: int,
    labels: Sequence[Sequence[Hashable]],
    world: int = 1,
) -> Mixing:
    """`labels`: each shard's labels in stored order; `world`: the ranks reading, where the
    dataset does not name them itself."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be 1 or more, got {batch_size}")
    if ds.world_size is not None:
        world = ds.world_size
    workers = max(1, num_workers)
    epoch = ds.epoch + ds.passes
    counts: list[int] = []
    for rank in range(world):
        for worker in range(workers):
            batch: set[Hashable] = set()
            filled = 0
            for value in ds.stream(epoch, rank, world, worker, workers, labels.__getitem__):
                batch.add(value)
                filled += 1
                if filled == batch_size:
                    counts.append(len(batch))
                    batch, filled = set(), 0
    classes = Counter(value for shard in labels for value in shard)
    shuffled = expected_distinct(list(classes.values()), batch_size)
    distinct = sum(counts) / len(counts) if counts else 0.0
    return Mixing(distinct, shuffled, len(counts))


def expected_distinct(class_sizes: list[int], batch_size: int) -> float:
    """Distinct classes in a batch drawn uniformly without replacement (hypergeometric):
    the sum over classes of the chance that a class appears at all."""
    total = sum(class_sizes)
    if batch_size > total:
        return float(len(class_sizes))
    log_all = _log_choose(total, batch_size)
    absent = [
        math.exp(_log_choose(total - n, batch_size) - log_all) if total - n >= batch_size else 0.0
        for n in class_sizes
    ]
    return sum(1.0 - p for p in absent)


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


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
