"""`diskinfo pack SRC DEST`: wires the arguments to diskinfo.pack and prints one summary line."""

from __future__ import annotations

import argparse
import sys

from diskinfo.pack import MANIFEST, pack
from diskinfo.units import format_size, parse_size


def run(args: argparse.Namespace) -> int:
    try:
        manifest = pack(
            args.src,
            args.dest,
            shards=args.shards,
            readers=args.readers,
            shard_size=None if args.shard_size is None else parse_size(args.shard_size),
            shuffle_seed=None if args.no_shuffle else args.shuffle_seed,
            force=args.force,
            progress=args.progress,
        )
    except KeyboardInterrupt:
        print(
            "diskinfo: interrupted; finished shards are kept, re-run the same command to resume",
            file=sys.stderr,
        )
        return 130
    classes = f", {len(manifest['classes'])} classes" if manifest["classes"] else ""
    shards = manifest["shards"]
    low, high = manifest["samples_per_shard"]
    each = f"{low}" if low == high else f"{low}-{high}"
    order = "shuffled" if manifest["shuffle_seed"] is not None else "in key order"
    print(
        f"packed {manifest['samples']} samples{classes}, {order}, into {len(shards)} shards of "
        f"{each} samples ({format_size(sum(s['bytes'] for s in shards))}; "
        f"{manifest['shard_rule']}) in {args.dest}; index: {args.dest.rstrip('/')}/{MANIFEST}"
    )
    return 0
