"""Read `diskinfo pack` shards as a torch IterableDataset, split across ranks and workers.

Every consumer (one DataLoader worker of one rank) gets a disjoint share, and together they
cover every sample exactly once:

- at least as many shards as consumers (the normal case): whole shards, dealt round-robin
  over `rank * num_workers + worker`, each read sequentially from start to end;
- fewer shards than consumers: every consumer streams all shards and keeps every n-th
  sample, which reads each shard several times; a warning (once) says to repack.

For training (the default) the shard order is reshuffled every epoch and samples pass
through a shuffle buffer, as webdataset's `.shuffle(n)`: batches mix shards, and epochs
differ. `train=False` reads in the packed order. Under DistributedDataParallel, `even="drop"`
or `even="pad"` gives every consumer, and so every rank, the same number of samples per
epoch, so no rank waits at the epoch's end for a batch another rank never sends.
`state_dict`/`load_state_dict` let torchdata's StatefulDataLoader resume mid-epoch at the
next sample.

Samples are dicts the way `webdataset` yields them: `__key__`, `__url__` and one bytes value
per member extension ("jpg", "json", "cls"). A pack made with `--labels key` (the default)
has no `cls` members: its samples get the same `cls` from the key's class folder and the
manifest, found beside the shards also when they are named by a pattern or a list.
"""

from __future__ import annotations

import itertools
import os
import time
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch.utils.data

from diskinfo.shards import shardlist
from diskinfo.shards.format import CLASS, class_folder, class_values, split_name
from diskinfo.shards.mixing import Mixing, mixing
from diskinfo.shards.stream import SHUFFLE_BUFFER, ShardStream
from diskinfo.shards.stream import buffer_shuffle as buffer_shuffle  # re-exported
from diskinfo.shards.tarstream import ShardError as ShardError  # raised by read_shard: re-exported
from diskinfo.shards.tarstream import tar_members as tar_members  # re-exported
from diskinfo.shards.tarstream import tar_spans

Sample = dict[str, Any]


def read_shard(
    path: str | Path,
    only: Sequence[str] | None = None,
    classes: Mapping[str, bytes] | None = None,
) -> Iterator[Sample]:
    """One sequential pass over a tar: consecutive members with one key form one sample.
    `only`: the extensions whose bytes are read; the others' are skipped, not read.
    `classes`: a pack made with `--labels key` (no `cls` members): each sample's `cls` is
    the value of its key's top folder, the bytes a `cls` member would have held."""
    keep = None if only is None else (lambda name: split_name(name)[1] in only)
    url = str(path)
    current: Sample | None = None
    current_key = None
    for span in tar_spans(path, keep):
        for name, data in span:
            key, ext = split_name(name)
            if key != current_key:
                if current is not None:
                    yield current
                current, current_key = {"__key__": key, "__url__": url}, key
                if classes is not None:
                    current[CLASS] = class_of(key, classes, url)
            if data is not None:
                current[ext] = data  # type: ignore[index]
    if current is not None:
        yield current


def class_of(key: str, classes: Mapping[str, bytes], url: str) -> bytes:
    """The `cls` of a sample of a pack made with `--labels key`: its key's top folder looked up
    in `class_values`; a key outside them is one ShardError line naming `url`."""
    try:
        return classes[class_folder(key)]
    except (KeyError, ValueError):
        raise ShardError(
            f"{url}: sample {key} is in no class folder the manifest lists "
            "(a pack made with --labels key keeps the class in the key)"
        ) from None


def with_class(sample: Sample, classes: Mapping[str, bytes]) -> Sample:
    """`sample` with the `cls` ShardDataset would give it, for another reader (webdataset)
    of a pack with the class in the keys: `.map(functools.partial(with_class,
    classes=class_values(manifest)))`. A module-level function, not a lambda: DataLoader
    workers started by spawn pickle the pipeline, and a lambda does not pickle."""
    return {**sample, CLASS: class_of(sample["__key__"], classes, sample["__url__"])}


def shard_labels(
    ds: ShardStream, label: str = CLASS, deadline: float | None = None
) -> list[list[Hashable]]:
    """Each shard's `label` members in stored order (None for a sample without one), read
    once for several `mixing` calls: only those members' bytes are read (none, for the
    `cls` of a pack made with `--labels key`: it is in the keys). TimeoutError when
    the monotonic clock passes `deadline` (a large set on slow storage: every tar header)."""
    out = []
    for path in ds.shards:
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"reading the {label!r} members took too long")
        out.append([s.get(label) for s in read_shard(path, (label,), ds.classes)])
    return out


def dist_initialized() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def consumer() -> tuple[int, int, int, int]:
    """(rank, world_size, worker, num_workers) of the calling process."""
    rank, world = 0, 1
    if dist_initialized():
        rank, world = torch.distributed.get_rank(), torch.distributed.get_world_size()
    elif "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    info = torch.utils.data.get_worker_info()
    worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
    return rank, world, worker, workers


class ShardDataset(torch.utils.data.IterableDataset, ShardStream):
    """Samples of a packed dataset. `source`: a `diskinfo pack` DEST (or its manifest.json);
    or tar shards made elsewhere (plain or gzipped): one path, a list of paths, a brace pattern
    as webdataset takes (`train-{000000..000146}.tar`) or a glob; a name that leads to no
    shard is a UserError here, not in a worker. rank/world_size default to torch.distributed,
    then to the RANK and WORLD_SIZE variables torchrun sets.

    train: default for the two shuffles below (off for evaluation: the packed order).
    shuffle_shards: reshuffle the shard order each epoch, the same on every rank for one
      seed. The epoch is the last `set_epoch` plus the passes made since, so persistent
      workers (whose copies never see `set_epoch`) move on by themselves; so does a loader
      wrapped in `diskinfo.torch.watch` (which counts the passes in the main process, where
      workers started afresh each epoch cannot); otherwise call `set_epoch` before each epoch.
    shuffle_buffer: samples held per consumer and handed out in random order (0: off).
    even: "drop" (stop every consumer at the smallest share) or "pad" (repeat samples up to
      the largest) so every rank yields the same number of batches; needs the manifest.
    """

    def __init__(
        self,
        source: str | Path | Sequence[str | Path],
        *,
        transform: Callable[[Sample], Any] | None = None,
        train: bool = True,
        shuffle_shards: bool | None = None,
        shuffle_buffer: int | None = None,
        even: str | None = None,
        seed: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        super().__init__()
        self.counts: list[int] | None = None
        self.shards, manifest = shardlist.resolve(source)
        self.classes = class_values(manifest or shardlist.manifest_beside(self.shards))
        self.samples: int | None = None
        if manifest is not None:
            self.samples = manifest.samples
            self.counts = [s.samples for s in manifest.shards]
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither")
        if world_size is not None and not 0 <= rank < world_size:  # type: ignore[operator]
            raise ValueError(f"rank {rank} outside world_size {world_size}")
        if even not in (None, "drop", "pad"):
            raise ValueError(f'even must be "drop", "pad" or None, got {even!r}')
        if even is not None and self.counts is None:
            raise ValueError("even= needs the per-shard sample counts: give the pack's DEST")
        if shuffle_buffer is not None and shuffle_buffer < 0:
            raise ValueError(f"shuffle_buffer must be 0 or more, got {shuffle_buffer}")
        self.transform = transform
        self.shuffle_shards = train if shuffle_shards is None else shuffle_shards
        self.shuffle_buffer = (
            (SHUFFLE_BUFFER if train else 0) if shuffle_buffer is None else shuffle_buffer
        )
        self.even = even
        self.seed = seed
        self.epoch = self.passes = 0
        self._begun = self._epoch_given = False  # see begin_pass
        self._position: dict[str, int] | None = None  # of the pass in progress: state_dict
        self._resume: dict[str, int] | None = None  # from load_state_dict, for the next pass
        self.rank, self.world_size = rank, world_size

    def __getstate__(self) -> dict[str, Any]:
        """Workers started by spawn or forkserver (Python 3.14's default) see no process
        group: the rank goes with the pickled copy, read where the DataLoader starts them."""
        state = self.__dict__.copy()
        if state["world_size"] is None and dist_initialized():
            state["rank"] = torch.distributed.get_rank()
            state["world_size"] = torch.distributed.get_world_size()
        return state

    def set_epoch(self, epoch: int) -> None:
        self.epoch, self.passes = epoch, 0
        self._epoch_given = True

    def begin_pass(self) -> None:
        """Count a pass in the main process, for DataLoader workers that start afresh each
        epoch from its copy (torch's default, persistent_workers=False) and so never see the
        passes their predecessors made: without this, and without `set_epoch`, every epoch
        would read the shards in the same order. `diskinfo.torch.watch` calls it at the start
        of each pass; a `set_epoch` since the last pass wins."""
        if self._begun and not self._epoch_given:
            self.passes += 1
        self._begun, self._epoch_given = True, False

    def _samples(self, index: int) -> Iterator[Sample]:
        return read_shard(self.shards[index], classes=self.classes)

    def mixing(self, batch_size: int, num_workers: int = 0, label: str = CLASS) -> Mixing:
        """Distinct classes per batch that this dataset's DataLoader (`batch_size`,
        `num_workers`) gives in the coming epoch, beside a fully shuffled loader's: read
        from the `label` members alone (see diskinfo.shards.mixing)."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be 1 or more, got {batch_size}")
        labels = shard_labels(self, label)
        if any(value is None for shard in labels for value in shard):
            raise ValueError(f"samples without a {label!r} member: the class mix needs labels")
        return mixing(self, batch_size, num_workers, labels, consumer()[1])

    def __iter__(self) -> Iterator[Any]:
        """Not a generator itself: the pass (its epoch, a resume) is settled when the
        DataLoader asks for the iterator, which StatefulDataLoader does before it takes the
        first state, and which it may do once for a finished epoch and throw away."""
        rank, world, worker, workers = consumer()
        if self.world_size is not None:
            rank, world = self.rank, self.world_size  # type: ignore[assignment]
        me, consumers = rank * workers + worker, world * workers
        where = {"rank": rank, "world_size": world, "worker": worker, "num_workers": workers}
        epoch, skip = self.epoch + self.passes, 0
        if self._resume is not None:
            saved, self._resume = self._resume, None
            if {k: saved[k] for k in where} != where:
                raise ValueError(
                    f"loader state saved by {_reader(saved)}, resumed by {_reader(where)}: "
                    "resume with the same ranks and DataLoader workers"
                )
            epoch, skip = saved["epoch"], saved["yielded"]
        self.passes += 1
        if me == 0 and epoch == 0 and not skip:
            shares = self._shares(self._order(epoch), consumers) if self.even else None
            self._warn_once(consumers, shares)
        stream = self.stream(epoch, rank, world, worker, workers, self._samples)
        # a resumed pass replays the same stream, untransformed, up to where it stopped
        self._position = {**where, "epoch": epoch, "yielded": skip}
        if skip:
            stream = itertools.islice(stream, skip, None)
        return self._yield(stream, self._position)

    def _yield(self, stream: Iterator[Sample], position: dict[str, int]) -> Iterator[Any]:
        """Counts a sample before handing it out: the state is taken while this generator
        waits at the yield, after the batch's last sample has gone."""
        transform, yielded = self.transform, position["yielded"]
        for sample in stream:
            yielded += 1
            position["yielded"] = yielded
            yield sample if transform is None else transform(sample)

    def state_dict(self) -> dict[str, int]:
        """Where this reader stands in its pass, for torchdata's StatefulDataLoader: it asks
        every worker (or the main process, without workers) after each batch and keeps the
        state that came with the last batch it handed out. The epoch, the samples handed out
        and the reader's place among ranks and workers: a resume rebuilds the same shard
        order and shuffle buffer (both seeded by these) and skips what was handed out."""
        if self._position is not None:
            return dict(self._position)
        rank, world, worker, workers = consumer()
        if self.world_size is not None:
            rank, world = self.rank, self.world_size  # type: ignore[assignment]
        return {
            "rank": rank,
            "world_size": world,
            "worker": worker,
            "num_workers": workers,
            "epoch": self.epoch + self.passes,
            "yielded": 0,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        """The next pass resumes where `state` (from `state_dict`) stopped, and later passes
        count on from its epoch."""
        keys = ("rank", "world_size", "worker", "num_workers", "epoch", "yielded")
        if not isinstance(state, dict) or not all(
            type(state.get(k)) is int and state[k] >= 0 for k in keys
        ):
            raise ValueError(f"not a ShardDataset state: {state!r:.200}")
        self._resume = {k: state[k] for k in keys}
        self.epoch, self.passes = state["epoch"], 0

    def _warn_once(self, consumers: int, shares: list[int] | None) -> None:
        """On the first epoch's first consumer only: fewer shards than readers, or `even`
        leaving out much of the data."""
        if len(self.shards) < consumers:
            warnings.warn(
                f"{len(self.shards)} shards for {consumers} readers (ranks x workers): every "
                f"reader streams all shards; repack with `diskinfo pack --readers {consumers}`",
                stacklevel=3,
            )
        elif self.even == "drop" and shares:
            total = sum(shares)
            left_out = total - min(shares) * consumers
            if left_out > 0.05 * total:
                warnings.warn(
                    f'even="drop" leaves out {left_out} of {total} samples per '
                    f"epoch ({len(self.shards)} shards over {consumers} readers); repack with "
                    f"`diskinfo pack --readers {consumers}`",
                    stacklevel=3,
                )


def _reader(where: dict[str, int]) -> str:
    return (
        f"rank {where['rank']} of {where['world_size']}, "
        f"worker {where['worker']} of {where['num_workers']}"
    )
