"""The order a ShardDataset hands its samples out in, apart from torch: which shards each
reader reads in an epoch, and the shuffle buffer. `ShardDataset` is a `ShardStream`; a pack
predicts its batches' mix with one (`mixing.predict`) without importing torch, whose import alone
costs seconds and a few hundred MB."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

T = TypeVar("T")
Reader = Callable[[int], Iterable[Any]]  # shard index -> its items in stored order
SHUFFLE_BUFFER = 1000  # samples, as in webdataset's examples: .shuffle(1000)
_INITIAL = 100  # samples buffered before the first one is handed out


class ShardStream:
    """The ordering half of ShardDataset; its attributes are set by the subclass."""

    shards: list[str]
    counts: list[int] | None
    shuffle_shards: bool
    shuffle_buffer: int
    even: str | None
    seed: int
    epoch: int
    passes: int
    world_size: int | None
    # a pack made with `--labels key`: class folder -> `cls` bytes (`shards.class_values`)
    classes: Mapping[str, bytes] | None = None

    def _order(self, epoch: int) -> list[int]:
        order = list(range(len(self.shards)))
        if self.shuffle_shards:
            random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def shard_order(self) -> list[str]:
        return [self.shards[i] for i in self._order(self.epoch + self.passes)]

    def shares(self, consumers: int, epoch: int | None = None) -> list[int]:
        """Samples each consumer reads in one epoch, before `even` (needs the manifest)."""
        if self.counts is None:
            raise ValueError("per-consumer shares need the pack's manifest")
        return self._shares(
            self._order(self.epoch + self.passes if epoch is None else epoch), consumers
        )

    def _shares(self, order: list[int], consumers: int) -> list[int]:
        assert self.counts is not None
        if len(order) >= consumers:
            return [sum(self.counts[i] for i in order[c::consumers]) for c in range(consumers)]
        total = sum(self.counts)
        return [total // consumers + (c < total % consumers) for c in range(consumers)]

    def _read(self, order: list[int], me: int, consumers: int, read: Reader) -> Iterator[Any]:
        if len(order) >= consumers:
            return itertools.chain.from_iterable(map(read, order[me::consumers]))
        every = itertools.chain.from_iterable(map(read, order))
        return (s for n, s in enumerate(every) if n % consumers == me)

    def stream(
        self, epoch: int, rank: int, world: int, worker: int, workers: int, read: Reader
    ) -> Iterator[Any]:
        """What one reader hands out in `epoch`, before the transform, with `read(i)` giving
        shard i's items: samples for training, labels alone for `mixing`. One definition of
        the order, so what `mixing` predicts is what the loader gives."""
        me, consumers = rank * workers + worker, world * workers
        order = self._order(epoch)
        shares = self._shares(order, consumers) if self.even is not None else None
        stream = self._read(order, me, consumers, read)
        if shares is not None and self.even == "drop":  # everyone stops at the smallest share
            stream = itertools.islice(stream, min(shares))
        elif shares is not None:  # "pad": everyone reads the largest share, re-reading its own
            if shares[me]:
                again = itertools.chain.from_iterable(
                    self._read(order, me, consumers, read) for _ in itertools.count()
                )
            else:  # fewer samples than consumers: pad from the whole set
                again = itertools.cycle(self._read(order, 0, 1, read))
            stream = itertools.islice(itertools.chain(stream, again), max(shares))
        if self.shuffle_buffer:
            seed = f"{self.seed}/{epoch}/{rank}/{worker}"
            stream = buffer_shuffle(stream, self.shuffle_buffer, random.Random(seed))
        return stream


def buffer_shuffle(samples: Iterator[T], size: int, rng: random.Random) -> Iterator[T]:
    """webdataset's shuffle(size): hand out a random sample of a buffer that refills from
    the stream; starts after _INITIAL samples (or `size` when smaller), drains at the end."""
    buf: list[T] = []
    start = min(_INITIAL, size)
    randrange, bits = rng.randrange, rng.getrandbits
    for sample in samples:
        buf.append(sample)
        held = len(buf)
        if held < size:
            buf.extend(itertools.islice(samples, 1))  # fill twice as fast as it empties
            held = len(buf)
        if held >= start:  # hand out a random one: swapped to the end, popped
            # randrange(held), inline: the same draws (Random._randbelow) without its two
            # calls, 0.19 us a sample instead of 0.34 (of about 6.5 through a DataLoader)
            k = bits(width := held.bit_length())
            while k >= held:
                k = bits(width)
            buf[k], buf[-1] = buf[-1], buf[k]
            yield buf.pop()
    while buf:
        k = randrange(len(buf))
        buf[k], buf[-1] = buf[-1], buf[k]
        yield buf.pop()
