"""Byte sizes, one rule for every option and message that takes or shows one.

The rule, as Docker's `--shm-size`, fio and dd read sizes: a bare `K`, `M`, `G`, `T` is binary
(`512M` = 512 MiB = 512 x 2**20 bytes), so is `KiB`/`MiB`/`GiB`/`TiB`; `kB`/`MB`/`GB`/`TB` are
decimal (`1GB` = 10**9 bytes), as disks are sold. Case and a space before the unit do not
matter; a bare number is bytes. Throughput figures (MB/s) follow iostat -m: MB = 2**20 bytes.
"""

from __future__ import annotations

import re

from diskinfo.errors import UserError

MIB = 2**20
SECTOR_BYTES = 512  # /proc/diskstats counts 512-byte sectors whatever the device's block size
RULE = "512M/512MiB = 512 x 2^20 bytes, 1GB = 10^9 bytes, a bare number = bytes"

_FACTORS = {
    "": 1,
    "b": 1,
    "k": 2**10,
    "kib": 2**10,
    "kb": 10**3,
    "m": 2**20,
    "mib": 2**20,
    "mb": 10**6,
    "g": 2**30,
    "gib": 2**30,
    "gb": 10**9,
    "t": 2**40,
    "tib": 2**40,
    "tb": 10**12,
}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*")


def parse_size(text: str, minimum: int = 1) -> int:
    """'512M' -> 536870912, '1GB' -> 10**9, '4096' -> 4096; UserError for anything else."""
    match = _SIZE.fullmatch(str(text))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _FACTORS:
        raise UserError(f"not a size: {text!r} ({RULE})")
    value = int(float(match.group(1)) * _FACTORS[unit])
    if value < minimum:
        raise UserError(f"size must be at least {format_size(minimum, binary=True)}, got {text}")
    return value


def size_arg(minimum: int = 1):
    """An argparse `type=` that applies the rule and keeps argparse's one-line error."""
    import argparse

    def parse(text: str) -> int:
        try:
            return parse_size(text, minimum)
        except UserError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def format_size(nbytes: float, binary: bool = False) -> str:
    """1234567 -> '1.23 MB' (decimal) or '1.2 MiB' (binary); the unit always says which."""
    step, units = (
        (1024, ("B", "KiB", "MiB", "GiB", "TiB"))
        if binary
        else (1000, ("B", "kB", "MB", "GB", "TB"))
    )
    value = float(nbytes)
    for unit in units[:-1]:
        if abs(value) < step:
            # 3 significant digits, but never "1e+03": 100 and above print whole
            return (
                f"{value:.0f} {unit}"
                if unit == "B" or abs(value) >= 99.95
                else f"{value:.3g} {unit}"
            )
        value /= step
    return f"{value:,.1f} {units[-1]}"


def format_given(nbytes: int) -> str:
    """A size the user gave, shown back in the units it was most likely given in: 100k reads
    back as '100 KiB' (not '102 kB'), 4GB as '4 GB'."""
    return format_size(nbytes, binary=nbytes % 1000 != 0 and nbytes % 1024 == 0)


def counted(n: int, noun: str, nouns: str | None = None) -> str:
    """'1 shard', '64 shards': a message about one thing should not read like one about many."""
    return f"{n} {noun}" if n == 1 else f"{n} {nouns or noun + 's'}"
