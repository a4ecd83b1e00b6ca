"""How many shards, and which samples go into each.

Shards hold equal sample counts (differing by at most one): every DataLoader worker that
gets the same number of shards then gets the same number of samples, and no reader sits on
one big shard while the others are done. The count, first rule that applies:

- `shards`: exactly that many;
- `readers` (ranks x DataLoader workers of the training run): a multiple of readers, at
  least SHARDS_PER_READER per reader, more when a shard would exceed MAX_SHARD_BYTES;
- `shard_size`: the fewest shards in which none is larger than shard_size (a sample larger
  than it gets a shard alone, so all shards then hold one sample);
- default: DEFAULT_SHARDS shards of at most MAX_SHARD_BYTES (more in multiples of
  DEFAULT_SHARDS for datasets over 64 GiB), or for datasets under 1 GiB the largest power of
  two that keeps shards at MIN_SHARD_BYTES or more. A power of two deals evenly over 1, 2, 4,
  8, 16, 32 and 64 readers, which covers 1-8 GPUs x 1-8 workers.

Never more shards than samples.

Which sample goes where (`shuffled`, `Layout`): the samples in key order, shuffled by
`random.Random(seed).shuffle` (the same permutation, so the same shards, as shuffling a list
of them), cut into consecutive runs. Memory: the permutation and its inverse, two arrays of
4 bytes per sample; the samples themselves stay on disk (`runs`).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import random
import tarfile
from array import array
from collections.abc import Callable, Sequence

from diskinfo.errors import UserError
from diskinfo.shards.format import FORMAT, LABEL_MEMBER
from diskinfo.shards.pack.scan import BLOCK
from diskinfo.units import counted, format_given

DEFAULT_SHARDS = 64
SHARDS_PER_READER = 4
MAX_SHARD_BYTES = 2**30
MIN_SHARD_BYTES = 16 * 2**20


def shard_count(
    n: int,
    nbytes: int,
    *,
    shards: int | None = None,
    readers: int | None = None,
    shard_size: int | None = None,
    tar_sizes: Callable[[], Sequence[int]] = lambda: (),
) -> tuple[int, str]:
    """(number of shards, the rule that chose it, in words for the manifest) for n samples of
    nbytes in all; `tar_sizes`: each sample's size in a tar, in the order they are packed
    (asked for only by shard_size)."""
    given = [name for name, v in (("--shards", shards), ("--readers", readers),
                                  ("--shard-size", shard_size)) if v is not None]  # fmt: skip
    if len(given) > 1:
        raise UserError(f"give one of {' and '.join(given)}: each sets the shard count")
    if shards is not None:
        if shards < 1:
            raise UserError(f"--shards must be at least 1, got {shards}")
        if shards > n:
            raise UserError(f"--shards {shards} is more than the {n} samples to pack")
        return shards, f"--shards {shards}"
    if readers is not None:
        if readers < 1:
            raise UserError(f"--readers must be at least 1, got {readers}")
        per = max(SHARDS_PER_READER, -(-nbytes // (readers * MAX_SHARD_BYTES)))
        count = readers * per
        rule = f"--readers {readers}: {per} shards per reader"
        if count > n:
            count = n - n % readers if n >= readers else n
            rule += f", cut to {count}: only {n} samples"
        return count, rule
    if shard_size is not None:
        return _fewest_within(tar_sizes(), shard_size), f"--shard-size {format_given(shard_size)}"
    if nbytes >= DEFAULT_SHARDS * MIN_SHARD_BYTES:
        count = DEFAULT_SHARDS * -(-nbytes // (DEFAULT_SHARDS * MAX_SHARD_BYTES))
    else:
        count = 1 << max(0, (nbytes // MIN_SHARD_BYTES).bit_length() - 1)
    rule = f"default: {counted(count, 'shard')}, see docs/shards.md"
    if count > n:
        count = 1 << (n.bit_length() - 1)
        rule += f", cut to {count}: only {n} samples"
    return count, rule


def bounds(n: int, count: int) -> list[tuple[int, int]]:
    """[start, end) of each shard over n samples: counts differ by at most one."""
    return [(k * n // count, (k + 1) * n // count) for k in range(count)]


def shuffled(n: int, seed: int | None) -> tuple[Sequence[int], Sequence[int]]:
    """(order, place) of n samples in key order shuffled with `seed` (None: kept in key
    order): order[position] is the index in key order of the sample packed at `position`,
    place is the inverse. The permutation is the one shuffling a list of the samples gives."""
    if seed is None:
        return range(n), range(n)
    order = array("I", range(n))
    random.Random(seed).shuffle(order)
    place = array("I", bytes(4 * n))
    for position, index in enumerate(order):
        place[index] = position
    return order, place


class Layout:
    """Which shard, and where in it, each sample goes: the shuffled samples cut into `count`
    runs of equal length (`bounds`)."""

    def __init__(self, order: Sequence[int], place: Sequence[int], count: int) -> None:
        self.order, self.place, self.count = order, place, count
        self.bounds = bounds(len(place), count)
        self.starts = [a for a, _ in self.bounds]

    def shard_of(self, index: int) -> tuple[int, int]:
        """(shard, position in it) of the sample with this index in key order."""
        position = self.place[index]
        shard = bisect.bisect_right(self.starts, position) - 1
        return shard, position - self.starts[shard]


def padded(nbytes: int) -> int:
    """Size of a tar of nbytes: tarfile pads the archive to whole 10 KiB records."""
    return -(-nbytes // tarfile.RECORDSIZE) * tarfile.RECORDSIZE


def _fewest_within(sizes: Sequence[int], shard_size: int) -> int:
    """The smallest equal-count split whose largest tar is within shard_size: linear steps,
    then growing ones, so a pathological input costs O(n log n), not O(n^2)."""
    n = len(sizes)
    prefix = array("q", [0])
    for size in sizes:
        prefix.append(prefix[-1] + size)

    def fits(count: int) -> bool:
        return all(
            b - a == 1 or padded(2 * BLOCK + prefix[b] - prefix[a]) <= shard_size
            for a, b in bounds(n, count)
        )

    count, steps = max(1, min(n, -(-prefix[-1] // shard_size))), 0
    while count < n and not fits(count):
        steps += 1
        count = min(n, count + (1 if steps < 64 else max(1, count // 16)))
    return count


def fingerprint(samples: str, count: int, seed: int | None, labels: str) -> str:
    """Identifies the plan: a resume is allowed only when SRC and the arguments are unchanged.
    `samples`: the scan's digest of every sample (`scan.Scan.digest`). "member" adds nothing:
    a pack interrupted before `--labels` existed wrote members, and resumes with that value."""
    plan: list[object] = [FORMAT, count, seed, samples]
    if labels != LABEL_MEMBER:
        plan.append(labels)
    return hashlib.sha256(json.dumps(plan).encode()).hexdigest()
