"""`diskinfo pack SRC DEST`: wires the arguments to diskinfo.pack and prints one summary line."""

from __future__ import annotations

import argparse
import sys

from diskinfo.errors import interrupted_exit
from diskinfo.shards.format import LABEL_KEY
from diskinfo.shards.mixing import in_words
from diskinfo.shards.pack import MANIFEST, pack
from diskinfo.units import counted, format_size


def run(args: argparse.Namespace) -> int:
    try:
        manifest = pack(
            args.src,
            args.dest,
            shards=args.shards,
            readers=args.readers,
            shard_size=args.shard_size,
            shuffle_seed=None if args.no_shuffle else args.shuffle_seed,
            labels=args.labels,
            force=args.force,
            progress=args.progress,
        )
    except KeyboardInterrupt as exc:
        print(
            "diskinfo: interrupted; finished shards are kept, re-run the same command to resume",
            file=sys.stderr,
        )
        return interrupted_exit(exc)
    classes = manifest["classes"]
    kinds = f", {counted(len(classes), 'class', 'classes')}" if classes else ""
    if classes and manifest.get("labels") == LABEL_KEY:
        kinds += " (in the keys; --labels member adds .cls members)"
    shards = manifest["shards"]
    low, high = manifest["samples_per_shard"]
    each = counted(low, "sample") if low == high else f"{low}-{high} samples"
    order = "shuffled" if manifest["shuffle_seed"] is not None else "in key order"
    print(
        f"packed {counted(manifest['samples'], 'sample')}{kinds}, {order}, into "
        f"{counted(len(shards), 'shard')} of {each} "
        f"({format_size(sum(s['bytes'] for s in shards))}; "
        f"{manifest['shard_rule']}) in {args.dest}; index: {args.dest.rstrip('/')}/{MANIFEST}"
    )
    if skipped := skipped_line(manifest["skipped"]):
        print(skipped)
    print(in_words(manifest["mixing"]))
    return 0


SKIPPED = {  # manifest key: what the line calls one, and many
    "top_level": ("file beside the class directories", "files beside the class directories"),
    "hidden": ("hidden file or directory", "hidden files or directories"),
    "no_extension": ("file without an extension", "files without an extension"),
    "not_regular": ("special file (FIFO, socket, device)", "special files (FIFO, socket, device)"),
}


def skipped_line(skipped: dict[str, int]) -> str | None:
    """What SRC held that the shards do not, in one line (None: nothing), so that a file left
    out is not a surprise found later in the manifest."""
    parts = [counted(skipped[key], *SKIPPED[key]) for key in SKIPPED if skipped.get(key)]
    if not parts:
        return None
    return f"left out: {', '.join(parts)}; counts under `skipped` in the index"
