"""`diskinfo bench PATH`: the device's sequential bandwidth and random 4 KiB IOPS, stored for the
verdicts. A directory gets a temporary test file (removed afterwards); a regular file is read
as it is, read-only, so a dataset file can serve without being touched."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

from diskinfo import baseline
from diskinfo.errors import UserError
from diskinfo.resolve import Resolver


def parse_size(text: str) -> int:
    """ "512M", "1G", "4096" -> bytes (binary units, as fio)."""
    units = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    raw = text.strip().lower().removesuffix("ib").removesuffix("b")
    factor = units.get(raw[-1:], 1)
    number = raw[:-1] if raw[-1:] in units else raw
    try:
        value = int(float(number) * factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 512M, 1G)") from None
    if value < 2**20:
        raise argparse.ArgumentTypeError(f"size must be at least 1M, got {text}")
    return value


def device_of(path: str) -> str:
    res = Resolver.live().resolve(path)
    if not res.watch_devices:
        raise UserError(f"{path}: {res.note or 'no block device behind this path to measure'}")
    return res.watch_devices[0]


def run(args: argparse.Namespace) -> int:
    path = args.path
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file or directory")
    device = device_of(path)
    made = None
    if os.path.isdir(path):
        if not os.access(path, os.W_OK):
            raise UserError(f"{path}: not writable; pass a large file on the device instead")
        print(
            f"diskinfo: writing a {args.size / 2**20:.0f} MiB test file in {path}", file=sys.stderr
        )
        made = baseline.write_test_file(path, args.size)
        target = made
    elif os.path.isfile(path):
        target = path
    else:
        raise UserError(f"{path}: not a regular file or directory")
    try:
        seq = baseline.sequential_read(target, args.seconds, limit=args.size)
        rand = baseline.random_read(target, args.seconds)
    finally:
        if made is not None:
            with contextlib.suppress(OSError):
                os.unlink(made)
    result = baseline.DeviceBaseline(
        device=device,
        seq_read_mb_s=round(seq.mb_s, 2),
        rand_read_iops=round(rand.iops, 1),
        rand_read_lat_ms=round(1000.0 / rand.iops, 4) if rand.iops else 0.0,
        path=os.path.abspath(path),
        size_mb=round(
            min(os.path.getsize(target) if made is None else args.size, args.size) / 2**20, 1
        ),
        measured_at=time.time(),
    )
    stored = None
    if not args.no_save:
        stored = baseline.save([result], Path(args.baseline) if args.baseline else None)
    if args.json:
        print(json.dumps({**vars(result), "stored": str(stored) if stored else None}))
    else:
        print(
            f"{device} ({path}): sequential read {result.seq_read_mb_s:.1f} MB/s "
            f"(1 MiB direct reads, QD1, {seq.seconds:.1f} s); random 4 KiB read "
            f"{result.rand_read_iops:.0f} IOPS ({result.rand_read_lat_ms:.3f} ms each, QD1)"
        )
        if stored:
            print(f"stored in {stored}: verdicts use it as {device}'s bandwidth")
    return 0
