"""How mixed a ShardDataset's batches are: distinct classes per batch, beside what a fully
shuffled loader (every batch a uniform draw from the whole set) gives for the same classes.

Shards trade random reads for a coarser shuffle: a batch mixes only the shards one reader has
open and what its shuffle buffer holds. This predicts the mix without reading a sample's
bytes: the `cls` members alone are read (the others are skipped, seeked over in a plain tar),
and the dataset's own stream (shard order, dealing, even=, shuffle buffer, all seeded) is run
on the labels. A DataLoader's batch comes whole from one worker, so batches are cut from each
reader's stream; only full batches are counted, as with drop_last.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Hashable
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from diskinfo.shards.stream import ShardStream


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
    num_workers: int = 0,
    label: str = "cls",
    labels: list[list[Hashable]] | None = None,
) -> Mixing:
    """`labels`: each shard's labels in order, when known without reading the shards (a
    pack knows them from its plan)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be 1 or more, got {batch_size}")
    if labels is None:
        labels = shard_labels(ds, label)
    if any(value is None for shard in labels for value in shard):
        raise ValueError(f"samples without a {label!r} member: the class mix needs labels")
    if ds.world_size is not None:
        world = ds.world_size
    else:
        from diskinfo.shards.dataset import consumer

        world = consumer()[1]
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


def shard_labels(
    ds: ShardStream, label: str = "cls", deadline: float | None = None
) -> list[list[Hashable]]:
    """Each shard's `label` members in stored order (None for a sample without one), read
    once for several `mixing` calls: only those members' bytes are read (none, for the
    `cls` of a pack made with `--labels key`: it is in the keys). TimeoutError when
    the monotonic clock passes `deadline` (a large set on slow storage: every tar header)."""
    from diskinfo.shards.dataset import read_shard  # torch: not for a caller that has the labels

    out = []
    for path in ds.shards:
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"reading the {label!r} members took too long")
        out.append([s.get(label) for s in read_shard(path, (label,), ds.classes)])
    return out


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
