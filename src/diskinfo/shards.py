"""Read `diskinfo pack` shards as a torch IterableDataset, split across ranks and workers.

Every consumer (one DataLoader worker of one rank) gets a disjoint share, and together they
cover every sample exactly once:

- at least as many shards as consumers (the normal case): whole shards, dealt round-robin
  over `rank * num_workers + worker`, each read sequentially from start to end;
- fewer shards than consumers: every consumer streams all shards and keeps every n-th
  sample, which reads each shard several times; a warning says to pack smaller shards.

Samples are dicts the way `webdataset` yields them: `__key__`, `__url__` and one bytes value
per member extension ("jpg", "json", "cls"). Shard counts differ by a sample or so between
consumers; under DistributedDataParallel, end each epoch on a fixed number of batches.
"""

from __future__ import annotations

import os
import random
import tarfile
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch.utils.data

from diskinfo.pack import read_manifest

Sample = dict[str, Any]
_BUFFER = 1 << 20


def split_name(name: str) -> tuple[str, str]:
    """'cat/0001.seg.png' -> ('cat/0001', 'seg.png'): the key ends at the basename's first dot,
    as in webdataset's base_plus_ext."""
    head, _, base = name.rpartition("/")
    stem, _, ext = base.partition(".")
    return (f"{head}/{stem}" if head else stem), ext.lower()


def read_shard(path: str | Path) -> Iterator[Sample]:
    """One sequential pass over a tar: consecutive members with one key form one sample."""
    with (
        open(path, "rb", buffering=_BUFFER) as handle,
        tarfile.open(fileobj=handle, mode="r|") as tar,
    ):
        current: Sample | None = None
        for info in tar:
            if not info.isfile():
                continue
            key, ext = split_name(info.name)
            if current is not None and current["__key__"] != key:
                yield current
                current = None
            if current is None:
                current = {"__key__": key, "__url__": str(path)}
            fh = tar.extractfile(info)
            current[ext] = fh.read() if fh is not None else b""
        if current is not None:
            yield current


def consumer() -> tuple[int, int, int, int]:
    """(rank, world_size, worker, num_workers) of the calling process."""
    rank, world = 0, 1
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    info = torch.utils.data.get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return rank, world, worker, workers


class ShardDataset(torch.utils.data.IterableDataset):
    """Samples of a packed dataset. `source`: a `diskinfo pack` DEST (or its manifest.json),
    or a list of tar paths. rank/world_size default to torch.distributed, then to the RANK
    and WORLD_SIZE variables torchrun sets. `shuffle_shards` reshuffles the shard order each
    epoch, the same on every rank for one seed: the epoch is the last `set_epoch` plus the
    passes made since, so persistent workers (whose copies never see `set_epoch`) move on by
    themselves; without persistent workers call `set_epoch` before each epoch."""

    def __init__(
        self,
        source: str | Path | Sequence[str | Path],
        *,
        transform: Callable[[Sample], Any] | None = None,
        shuffle_shards: bool = False,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        super().__init__()
        if isinstance(source, (str, Path)):
            manifest = read_manifest(source)
            base = Path(source) if Path(source).is_dir() else Path(source).parent
            self.shards = [str(base / s["name"]) for s in manifest["shards"]]
            self.samples: int | None = manifest["samples"]
        else:
            self.shards = [str(p) for p in source]
            self.samples = None
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither")
        if world_size is not None and not 0 <= rank < world_size:  # type: ignore[operator]
            raise ValueError(f"rank {rank} outside world_size {world_size}")
        self.transform = transform
        self.shuffle_shards = shuffle_shards
        self.seed = seed
        self.epoch = self.passes = 0
        self.rank, self.world_size = rank, world_size

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.passes = epoch, 0

    def shard_order(self) -> list[str]:
        order = list(self.shards)
        if self.shuffle_shards:
            random.Random(self.seed * 1_000_003 + self.epoch + self.passes).shuffle(order)
        return order

    def __iter__(self) -> Iterator[Any]:
        rank, world, worker, workers = consumer()
        if self.world_size is not None:
            rank, world = self.rank, self.world_size  # type: ignore[assignment]
        me, consumers = rank * workers + worker, world * workers
        order = self.shard_order()
        self.passes += 1
        if len(order) >= consumers:
            picked = (s for path in order[me::consumers] for s in read_shard(path))
        else:
            if me == 0:
                warnings.warn(
                    f"{len(order)} shards for {consumers} readers (ranks x workers): every "
                    "reader streams all shards; pack with a smaller --shard-size",
                    stacklevel=2,
                )
            every = (s for path in order for s in read_shard(path))
            picked = (s for i, s in enumerate(every) if i % consumers == me)
        for sample in picked:
            yield sample if self.transform is None else self.transform(sample)
