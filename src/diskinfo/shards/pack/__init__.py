"""Pack a tree of small files into WebDataset tar shards that train well as they are.

Thousands of small random reads become a few large sequential ones: the fix for the
"input-bound: small-file random reads" verdict. By default the samples are shuffled (seed 0,
recorded in the manifest) before they are cut into shards of equal sample counts, so each
shard is a random mix of the classes and every reader gets the same amount of work; the shard
count follows `plan.shard_count` (64 by default; `readers` or `shards` to choose). How files
become samples: `scan`. SRC is read once in disk order, not in shuffled order: `spill`. How a
shard is written and verified: `shard`. Memory stays flat in the number of files: the list of
files, samples and where each goes is kept and sorted on disk (`runs`); what is held per
sample is the shuffle's permutation, its inverse and the labels, 4 bytes each (`plan`).

Safety: each shard is read back from the device and checked before it is renamed into
place. A state file in DEST lists finished shards, so a re-run after an interruption resumes
without rewriting them; the manifest is written last. Shard bytes are deterministic: same
SRC, same arguments, same sha256.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
import time
from array import array
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from diskinfo.errors import UserError
from diskinfo.fileio import fsync_dir, make_dirs, opened_dir, read_regular, write_atomic
from diskinfo.shards.format import (
    FORMAT,
    LABEL_KEY,
    LABEL_MEMBER,
    LABELS,
    MANIFEST,
    Manifest,
    ShardEntry,
    read_manifest,
    shard_name,
)
from diskinfo.shards.mixing import predict
from diskinfo.shards.pack.access import Owner, source_owner
from diskinfo.shards.pack.plan import Layout, fingerprint, shard_count, shuffled
from diskinfo.shards.pack.progress import Progress
from diskinfo.shards.pack.scan import Member, Sample, Scan, check_paths, scan, tar_size
from diskinfo.shards.pack.shard import verify, write_shard
from diskinfo.shards.pack.spill import OPEN_SPILLS, spill_shards
from diskinfo.sources import mountinfo
from diskinfo.units import format_size

__all__ = [
    "DEFAULT_SEED",
    "FORMAT",
    "LABELS",
    "MANIFEST",
    "STATE",
    "Member",
    "Sample",
    "Scan",
    "pack",
    "read_manifest",
    "scan",
    "shard_count",
    "shard_name",
    "tar_size",
    "verify",
    "write_shard",
]

STATE = ".diskinfo-pack-state.json"
STATE_CAP = 64 << 20  # bytes: a state file of a million shards; a planted one is not read
DEFAULT_SEED = 0


def _no_space(exc: OSError) -> bool:
    return exc.errno in (errno.ENOSPC, errno.EDQUOT)


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=1) + "\n", durable=True, owned=True)


def _ours(name: str) -> bool:
    """A pack's files, and the temp files of its writes (write_atomic's `.NAME.XXXX.tmp`)."""
    return (
        (name.startswith("shard-") and name.endswith(".tar"))
        or name in (MANIFEST, STATE)
        or (name.startswith((".shard-", f".{MANIFEST}.", f".{STATE}.")) and name.endswith(".tmp"))
    )


def prepare_dest(
    dest: Path,
    plan_id: str,
    force: bool,
    say: Callable[[str], None],
    resumed_by: Mapping[str, str] | None = None,
) -> dict:
    """Create DEST, or resume the interrupted pack in it, or refuse. --force removes only the
    files a pack writes (shards, manifest, state): anything else in DEST is left alone.
    `resumed_by`: the fingerprints of plans that differ only in an option, and that option
    (`--labels member`): a refusal names it, as a pack started before its default changed
    needs it to resume."""
    state_path = dest / STATE
    fresh = {"format": FORMAT, "fingerprint": plan_id, "done": {}}
    if not dest.exists():
        make_dirs(dest)
        return fresh
    if not dest.is_dir():
        raise UserError(f"DEST exists and is not a directory: {dest}")
    names = os.listdir(dest)
    if force:
        for name in names:
            if _ours(name):
                os.unlink(dest / name)  # a link itself, never what it points to
        return fresh
    if STATE in names and MANIFEST not in names:
        try:
            state = json.loads(read_regular(state_path, STATE_CAP))
        except (OSError, ValueError):
            state = {}
        if not isinstance(state, dict) or not isinstance(state.get("done"), dict):
            state = {}
        if (option := (resumed_by or {}).get(state.get("fingerprint", ""))) is not None:
            raise UserError(
                f"{dest} holds an interrupted pack made with {option}; re-run with {option} "
                "to resume it, or use --force to start over"
            )
        if state.get("fingerprint") != plan_id:
            raise UserError(
                f"{dest} holds an interrupted pack of other input (SRC, the shard count, the "
                "shuffle seed or --labels changed); re-run it unchanged, or use --force to "
                "start over"
            )
        for name in names:
            if name.endswith(".tmp") and name.startswith((".shard-", f".{STATE}.")):
                os.unlink(dest / name)  # a shard or a state file cut off mid-write: not trusted
        say(f"resuming: {len(state['done'])} finished shards kept")
        return state
    if MANIFEST in names:
        raise UserError(f"{dest} already holds a finished pack; use --force to overwrite it")
    if names:
        raise UserError(f"DEST {dest} exists and is not empty; use --force to write into it")
    return fresh


def pack(
    src: str | Path,
    dest: str | Path,
    *,
    shards: int | None = None,
    readers: int | None = None,
    shard_size: int | None = None,
    shuffle_seed: int | None = DEFAULT_SEED,
    labels: str = LABEL_KEY,
    force: bool = False,
    progress: bool | None = None,
    stream: TextIO | None = None,
) -> Manifest:
    """Pack SRC into DEST and return the manifest (also written to DEST/manifest.json).
    At most one of shards/readers/shard_size (see `plan.shard_count`); shuffle_seed None
    keeps the samples in key order. labels: "key" leaves each sample's class in its key's
    folder alone, for ShardDataset to give from the manifest; "member" writes it as a `cls`
    member too, as webdataset reads it (`format.LABELS`). progress None: a bar only when
    `stream` (default stderr) is a terminal."""
    if labels not in LABELS:
        raise UserError(f"--labels must be one of {', '.join(LABELS)}, got {labels!r}")
    src, dest = Path(src), Path(dest)
    out = stream or sys.stderr
    check_paths(src, dest)
    owner = source_owner(src)  # run as root: SRC's owner bounds what is read (pack.access)
    count_by = {"shards": shards, "readers": readers, "shard_size": shard_size}
    room = _room(dest)
    _check_writable(room, dest)
    try:
        found = scan(src, dest, owner, room)
    except OSError as exc:
        if not _no_space(exc):
            raise
        raise UserError(
            f"out of disk space in {room} while listing SRC: the list of its files is sorted "
            "in temporary files there, beside DEST; free space and re-run"
        ) from None
    with found:
        options = _Options(shuffle_seed, labels, force, progress, count_by)
        return _pack(src, dest, found, owner, out, options)


def _check_writable(room: Path, dest: Path) -> None:
    """A folder pack cannot write is said before any work, with its owner and the way out;
    found later, the error named one of its temporary files ("Permission denied: .../tmpXXX").
    In the image a root user's project folder is the usual case: the services run as NB_USER."""
    if os.access(room, os.W_OK | os.X_OK):
        return
    what = "DEST" if room == dest else f"DEST's folder (for {dest})"
    try:
        st = room.stat()
        owner = f"owned by uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):o}; "
    except OSError:
        owner = ""
    fix = "pack into a folder you can write, or have its owner give you write access to it"
    if os.environ.get("PYTORCH_CUDA_LIB"):  # the image: a host folder of root's, mounted
        try:
            mounts, _ = mountinfo.parse(mountinfo.read())
            mount = mountinfo.mount_for(str(room.resolve()), mounts)
        except OSError:
            mount = None
        where = mount.mountpoint if mount is not None else "THE_FOLDER_YOU_MOUNTED"
        fix += f" (a folder of root's on the host: start the container with -e CHOWN_EXTRA={where})"
    raise UserError(f"cannot write {what} {room} ({owner}this runs as uid {os.getuid()}): {fix}")


def _room(dest: Path) -> Path:
    """Where the plan's temporary files go before DEST exists: the nearest folder of DEST's
    path that does, on DEST's filesystem, which has room for the shards anyway."""
    while not dest.is_dir() and dest.parent != dest:
        dest = dest.parent
    return dest


@dataclass(frozen=True)
class _Options:
    """pack's options, passed down as one: what shapes the shards (seed, labels, the count)
    and how this pack behaves (force, progress)."""

    shuffle_seed: int | None
    labels: str
    force: bool
    progress: bool | None
    count_by: dict[str, Any]

    @property
    def label_member(self) -> bool:
        return self.labels == LABEL_MEMBER


def _layout(found: Scan, options: _Options) -> tuple[Layout, str]:
    """The shuffle and the shard count (`plan`), and the rule that chose the count."""
    n = len(found.samples)
    order, place = shuffled(n, options.shuffle_seed)

    def tar_sizes() -> array[int]:
        sizes = array("q", bytes(8 * n))
        for i, sample in enumerate(found.samples):
            sizes[place[i]] = tar_size(sample, options.label_member)
        return sizes

    count, rule = shard_count(n, found.nbytes, tar_sizes=tar_sizes, **options.count_by)
    return Layout(order, place, count), rule


def _pack(
    src: Path, dest: Path, found: Scan, owner: Owner | None, out: TextIO, options: _Options
) -> Manifest:
    n, total = len(found.samples), found.nbytes
    layout, rule = _layout(found, options)
    count = layout.count
    plan_id = fingerprint(found.digest, count, options.shuffle_seed, options.labels)
    resumed_by = {
        fingerprint(found.digest, count, options.shuffle_seed, other): f"--labels {other}"
        for other in LABELS
        if other != options.labels
    }
    state = prepare_dest(
        dest, plan_id, options.force, lambda line: print(line, file=out), resumed_by
    )
    bar = Progress(n, total, out, options.progress)
    # per shard its bytes (the bar skips finished ones) and, by position, the labels the
    # batch-mix prediction runs on: 4 bytes per sample, the samples stay on disk
    shard_bytes = [0] * count
    labels = array("I", bytes(4 * n)) if found.classes else None
    for i, (_, label, members) in enumerate(found.samples.raw()):
        shard = layout.shard_of(i)[0]
        shard_bytes[shard] += sum(m[2] for m in members)
        if labels is not None:
            labels[layout.place[i]] = label
    try:
        write_json_atomic(dest / STATE, state)
        records: list[dict[str, Any] | None] = []
        todo: dict[str, int] = {}
        for index, (a, b) in enumerate(layout.bounds):
            name = shard_name(index)
            done = state["done"].get(name)
            if done and (dest / name).is_file() and (dest / name).stat().st_size == done["bytes"]:
                records.append(done)
                bar.advance(b - a, shard_bytes[index], resumed=True)
            else:
                records.append(None)
                todo[name] = index
        names = list(todo)
        for start in range(0, len(names), OPEN_SPILLS):
            window = {name: todo[name] for name in names[start : start + OPEN_SPILLS]}
            _write_window(dest, window, found, layout, owner, state, records, bar, options)
        settings = {"rule": rule, **options.count_by, "bytes": total, "labels": options.labels}
        paths = [dest / shard_name(i) for i in range(count)]
        settings["mixing"] = predict(paths, layout.bounds, labels, layout.order)
        manifest = _manifest(src, found, [r for r in records if r], settings, options.shuffle_seed)
        manifest.write(dest)
        (dest / STATE).unlink()
        fsync_dir(dest)
    except OSError as exc:
        if not _no_space(exc):
            raise
        kept = len(state["done"])
        raise UserError(
            f"out of disk space in {dest} after {kept} of {count} shards (about "
            f"{format_size(total)} in all); finished shards are kept: free space and re-run the "
            "same command to resume"
        ) from None
    except BaseException:
        bar.finish(complete=False)
        raise
    bar.finish()
    return manifest


def _write_window(
    dest: Path,
    shards: dict[str, int],
    found: Scan,
    layout: Layout,
    owner: Owner | None,
    state: dict[str, Any],
    records: list[dict[str, Any] | None],
    bar: Progress,
    options: _Options,
) -> None:
    """Read these shards' files once in disk order (`spill`), then write each shard from its
    spill, recording it in the state file as soon as it is in place."""
    with opened_dir(dest) as dir_fd:
        advance = lambda nbytes: bar.advance(0, nbytes)  # noqa: E731
        spills = spill_shards(dir_fd, shards, found.samples, layout, owner, dest, advance)
        try:
            for name, index in shards.items():
                record = write_shard(dest, name, None, owner, spills[name], options.label_member)
                spills.pop(name).remove()
                records[index] = record
                state["done"][name] = record
                write_json_atomic(dest / STATE, state)
                bar.advance(record["samples"], 0)
        finally:
            for left in spills.values():
                left.remove()


def _manifest(
    src: Path,
    found: Scan,
    records: list[dict[str, Any]],
    settings: dict[str, Any],
    seed: int | None,
) -> Manifest:
    counts = [r["samples"] for r in records]
    return Manifest(
        format=FORMAT,
        source=str(src.resolve()),
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        samples=len(found.samples),
        bytes=settings["bytes"],
        classes=found.classes,
        labels=settings["labels"],
        class_counts=found.class_counts,
        extensions=found.extensions,
        order="sorted by key" if seed is None else "shuffled",
        shuffle_seed=seed,
        shard_rule=settings["rule"],
        readers=settings["readers"],
        shard_size=settings["shard_size"],
        samples_per_shard=[min(counts), max(counts)],
        mixing=settings["mixing"],
        checksum="sha256 of each whole shard, read back from the device after writing",
        skipped={
            "hidden": found.skipped_hidden,
            "no_extension": found.skipped_no_extension,
            "not_regular": found.skipped_special,
            "top_level": found.skipped_top_level,
        },
        shards=[ShardEntry(**r) for r in records],
    )
