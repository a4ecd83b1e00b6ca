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
"""

from __future__ import annotations

import hashlib
import json
import tarfile

from diskinfo.errors import UserError
from diskinfo.pack.scan import BLOCK, Sample, tar_size
from diskinfo.units import counted, format_given

FORMAT = "diskinfo.pack/1"
DEFAULT_SHARDS = 64
SHARDS_PER_READER = 4
MAX_SHARD_BYTES = 2**30
MIN_SHARD_BYTES = 16 * 2**20


def shard_count(
    samples: list[Sample],
    nbytes: int,
    *,
    shards: int | None = None,
    readers: int | None = None,
    shard_size: int | None = None,
) -> tuple[int, str]:
    """(number of shards, the rule that chose it, in words for the manifest); nbytes: the
    samples' total size."""
    given = [name for name, v in (("--shards", shards), ("--readers", readers),
                                  ("--shard-size", shard_size)) if v is not None]  # fmt: skip
    if len(given) > 1:
        raise UserError(f"give one of {' and '.join(given)}: each sets the shard count")
    n = len(samples)
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
        return _fewest_within(samples, shard_size), f"--shard-size {format_given(shard_size)}"
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


def plan(samples: list[Sample], count: int) -> list[list[Sample]]:
    """Cut the (shuffled or sorted) samples into `count` consecutive runs of equal length."""
    return [samples[a:b] for a, b in bounds(len(samples), count)]


def padded(nbytes: int) -> int:
    """Size of a tar of nbytes: tarfile pads the archive to whole 10 KiB records."""
    return -(-nbytes // tarfile.RECORDSIZE) * tarfile.RECORDSIZE


def _fewest_within(samples: list[Sample], shard_size: int) -> int:
    """The smallest equal-count split whose largest tar is within shard_size: linear steps,
    then growing ones, so a pathological input costs O(n log n), not O(n^2)."""
    n = len(samples)
    prefix = [0]
    for s in samples:
        prefix.append(prefix[-1] + tar_size(s))

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


def fingerprint(shards: list[list[Sample]], seed: int | None) -> str:
    """Identifies the plan: a resume is allowed only when SRC and the arguments are unchanged."""
    digest = hashlib.sha256(json.dumps([FORMAT, len(shards), seed]).encode())
    for shard in shards:
        for s in shard:
            digest.update(
                json.dumps([s.key, s.label, [[m.ext, m.size, m.mtime] for m in s.members]]).encode()
            )
        digest.update(b"|")
    return digest.hexdigest()
