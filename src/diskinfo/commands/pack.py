"""`diskinfo pack SRC DEST`: wires the arguments to diskinfo.pack and prints one summary line."""

from __future__ import annotations

import argparse
import sys

from diskinfo.pack import MANIFEST, human, pack, parse_size


def run(args: argparse.Namespace) -> int:
    try:
        manifest = pack(
            args.src,
            args.dest,
            shard_size=parse_size(args.shard_size),
            shuffle_seed=args.shuffle_seed,
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
    print(
        f"packed {manifest['samples']} samples{classes} into {len(shards)} shards "
        f"({human(sum(s['bytes'] for s in shards))}) in {args.dest}; "
        f"index: {args.dest.rstrip('/')}/{MANIFEST}"
    )
    return 0
