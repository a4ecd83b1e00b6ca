"""`diskinfo pack SRC DEST`: wires the arguments to diskinfo.pack and prints one summary line."""

from __future__ import annotations

import argparse
import sys

from diskinfo.errors import interrupted_exit
from diskinfo.pack import MANIFEST, pack
from diskinfo.pack.mix import in_words
from diskinfo.pack.plan import LABEL_KEY, LABEL_MEMBER
from diskinfo.pack.scan import BLOCK
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
        kinds += " (in the keys: no .cls members)"
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
    if members := label_member_line(manifest):
        print(members)
    print(in_words(manifest["mixing"]))
    return 0


MEMBER_SHARE = 0.10  # of the shards' bytes: from here on the summary names --labels key


def label_member_line(manifest: dict) -> str | None:
    """The class members' share of the shards when it is large (small samples: each member
    takes a tar header and a padded block, 1 kB, for a few bytes), so that a user reading
    with ShardDataset learns the option that leaves them out; None otherwise."""
    if not manifest["classes"] or manifest.get("labels", LABEL_MEMBER) != LABEL_MEMBER:
        return None
    total = sum(s["bytes"] for s in manifest["shards"])
    share = manifest["samples"] * 2 * BLOCK / total if total else 0.0
    if share < MEMBER_SHARE:
        return None
    return (
        f"the .cls members are {share:.0%} of the shards' bytes: read with ShardDataset, "
        "`--labels key` leaves them out (docs/shards.md)"
    )


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
