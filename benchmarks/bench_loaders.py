"""`diskinfo pack` + `ShardDataset` beside three peers, on the same data, cold cache.

    sudo .venv/bin/python -m benchmarks.bench_loaders                 # both sets, every cell
    sudo .venv/bin/python -m benchmarks.bench_loaders --sets 20k      # one set (merged into
                                                                      # the results' JSON)
    sudo .venv/bin/python -m benchmarks.bench_loaders --render        # Markdown from the JSON

(from the repository's root, with the peers installed: `pip install -e '.[bench]'`.)

Writers: `diskinfo pack` (its defaults: the class in each sample's key; `pack-member`: with
`--labels member`, a `.cls` member too), webdataset's `ShardWriter`, litdata's `optimize`,
mosaicml-streaming's `MDSWriter`. Readers: `ShardDataset`, webdataset's `WebDataset`, litdata's
`StreamingDataset`, streaming's `StreamingDataset`, each with its training shuffle. Every
(writer, reader) pair the formats allow is read: both tar readers read both tar writers'
shards; litdata and MDS read only their own format.

Per set: the small-file tree is generated (ImageFolder layout), then converted once by each
writer, cold (sync, drop_caches=3 before each), in a child process whose time runs from after
its imports to its output on disk (a final sync), and whose peak RSS is sampled. Then the
read cells, each one child: imports, then the data is made cold (make_cold: caches dropped,
the child's code read back), then the dataset and DataLoader are built and read for a fixed
number of samples; samples/s, peak RSS, the reads the child's process tree issued (its blkio
group) and the distinct classes per full batch (its labels, counted the same way for every
reader, beside a fully shuffled loader's expectation from diskinfo.shards.mixing). A cell
group (set, IOPS cap, workers) runs every pair back to back, in an order rotated per group, so
the load of a shared machine falls on all pairs alike: compare within a group.

Needs root (drop_caches, cgroup v1 blkio for the 1,000-IOPS cap, as bench_shards).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import json
import math
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BATCH = 32
WRITERS = (
    *("pack", "pack-member", "pack-key", "wds-keyorder"),
    *("webdataset", "litdata", "streaming", "tar"),
)
# writer -> `diskinfo pack` options. pack-key: `--labels key` named, as before it was the
# default; not run by default, kept so that the sections measured then still render
PACKS = {"pack": [], "pack-member": ["--labels", "member"], "pack-key": ["--labels", "key"]}
PEER_WRITERS = ("webdataset", "litdata", "streaming")
# wds-keyorder: ShardWriter over the files in key order (class by class), timed only: the
# fastest a tar writer can read the tree, but its shards hold whole classes (not read here).
# tar: `tar -cf` of the tree into one file, timed only: the floor a conversion is held to, and
# the yardstick for the disk of the hour (a shared VM's disk: writers' times moved by half in a day)
# pair name -> (writer, reader)
PAIRS = {
    "pack+ShardDataset": ("pack", "ShardDataset"),
    "pack-member+ShardDataset": ("pack-member", "ShardDataset"),
    "pack+WebDataset": ("pack", "WebDataset"),
    "wds+WebDataset": ("webdataset", "WebDataset"),
    "wds+ShardDataset": ("webdataset", "ShardDataset"),
    "litdata+litdata": ("litdata", "litdata"),
    "mds+streaming": ("streaming", "streaming"),
    "pack-key+ShardDataset": ("pack-key", "ShardDataset"),
}
OURS = ("pack+ShardDataset", "pack-member+ShardDataset", "pack-key+ShardDataset")


@dataclass(frozen=True)
class Shape:
    files: int
    min_kb: int
    max_kb: int
    classes: int
    samples: int  # read per cell: a full epoch for 20k, a fifth of one for 200k


SETS = {
    # the earlier measurements: 10-60 kB for the 10k run outside, 1-8 kB in 1,000
    # class folders for 200k; 100 classes for 20k so that a batch of 32 is not saturated
    "20k": Shape(20_000, 10, 60, 100, 20_000),
    "200k": Shape(200_000, 1, 8, 1_000, 40_000),
}


# --- children: one conversion or one read cell, started by the parent ---


def reduce_sample(sample: dict) -> tuple[int, int]:
    """The same per-sample work in every reader: the payload's length and the label."""
    return len(sample["bin"]), int(sample["cls"])


def litdata_sample(item: tuple[str, int]) -> dict:
    """litdata's optimize fn (module level: its workers are spawned and import it)."""
    path, label = item
    with open(path, "rb") as fh:
        return {"bin": fh.read(), "cls": label}


def import_streaming() -> Any:
    """streaming.base without the package's __init__: that one imports streaming.vision and so
    torchvision, whose PyPI wheel is built against CUDA torch and does not load beside a CPU
    torch. MDSWriter and StreamingDataset live in streaming.base and need neither."""
    import importlib.util
    import types

    if "streaming" not in sys.modules:
        spec = importlib.util.find_spec("streaming")
        if spec is None or spec.submodule_search_locations is None:
            raise SystemExit("mosaicml-streaming is not installed")
        pkg = types.ModuleType("streaming")
        pkg.__path__ = list(spec.submodule_search_locations)
        sys.modules["streaming"] = pkg
    import streaming.base

    return streaming.base


def source_items(src: Path, shuffle: bool = True) -> list[tuple[str, int]]:
    """(path, class index) of every file, ImageFolder's numbering, shuffled with seed 0: the
    order every peer writer writes in (pack shuffles with seed 0 by itself)."""
    classes = sorted(p.name for p in src.iterdir() if p.is_dir())
    items = [
        (str(f), label)
        for label, name in enumerate(classes)
        for f in sorted((src / name).iterdir())
    ]
    if shuffle:
        random.Random(0).shuffle(items)
    return items


def convert(writer: str, src: Path, dest: Path, per_shard: int) -> dict:
    if writer in PACKS:
        from diskinfo.cli import main as diskinfo_main

        go()
        start = time.monotonic()
        if diskinfo_main(["pack", *PACKS[writer], str(src), str(dest)]) not in (0, None):
            raise SystemExit("pack failed")
    elif writer in ("webdataset", "wds-keyorder"):
        import webdataset as wds

        go()
        start = time.monotonic()
        dest.mkdir(parents=True)
        items = source_items(src, shuffle=writer == "webdataset")
        with wds.ShardWriter(str(dest / "shard-%06d.tar"), maxcount=per_shard, verbose=0) as sink:
            for i, (path, label) in enumerate(items):
                with open(path, "rb") as fh:
                    sink.write({"__key__": f"{i:07d}", "bin": fh.read(), "cls": label})
    elif writer == "tar":
        go()
        start = time.monotonic()
        dest.mkdir(parents=True)
        subprocess.run(["tar", "-cf", str(dest / "tree.tar"), "-C", str(src), "."], check=True)
    elif writer == "litdata":
        from litdata import optimize

        go()
        start = time.monotonic()
        optimize(
            fn=litdata_sample, inputs=source_items(src), output_dir=str(dest), chunk_bytes="64MB"
        )
    else:
        mds = import_streaming()
        go()
        start = time.monotonic()
        with mds.MDSWriter(out=str(dest), columns={"bin": "bytes", "cls": "int"}) as out:
            for path, label in source_items(src):
                with open(path, "rb") as fh:
                    out.write({"bin": fh.read(), "cls": label})
    os.sync()
    return {"seconds": time.monotonic() - start}


def build_loader(writer: str, reader: str, data: Path, workers: int) -> Any:
    import torch.utils.data

    out = data / writer
    if reader == "ShardDataset":
        from diskinfo.shards import ShardDataset

        source = out if writer in PACKS else sorted(glob.glob(str(out / "*.tar")))
        dataset = ShardDataset(source, transform=reduce_sample)
        return torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=workers)
    if reader == "WebDataset":
        import webdataset as wds

        urls = sorted(glob.glob(str(out / "*.tar")))
        # as docs/shards.md shows it: shards shuffled, a 1,000-sample buffer, and for a pack
        # with the class in the keys, `cls` from the manifest
        dataset = wds.WebDataset(urls, shardshuffle=100).shuffle(1000)
        if writer in PACKS:
            from diskinfo.shards import class_values, with_class
            from diskinfo.shards.pack import read_manifest

            if (classes := class_values(read_manifest(out))) is not None:
                dataset = dataset.map(functools.partial(with_class, classes=classes))
        dataset = dataset.map(reduce_sample)
        return torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=workers)
    if reader == "litdata":
        from litdata import StreamingDataLoader, StreamingDataset

        dataset = StreamingDataset(str(out), shuffle=True, transform=reduce_sample)
        return StreamingDataLoader(dataset, batch_size=BATCH, num_workers=workers)
    mds = import_streaming()

    class Reduced(mds.StreamingDataset):  # the documented place for a transform
        def __getitem__(self, index: Any) -> Any:
            return reduce_sample(super().__getitem__(index))

    dataset = Reduced(local=str(out), shuffle=True, batch_size=BATCH)
    return torch.utils.data.DataLoader(dataset, batch_size=BATCH, num_workers=workers)


def read_cell(pair: str, data: Path, workers: int, samples: int, max_s: float) -> dict:
    writer, reader = PAIRS[pair]
    import torch.utils.data  # noqa: F401 - imported before the data is made cold

    if reader == "ShardDataset":
        import diskinfo.shards  # noqa: F401
    elif reader == "WebDataset":
        import webdataset  # noqa: F401
    elif reader == "litdata":
        import litdata  # noqa: F401
    else:
        import_streaming()
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()  # a killed cell's leftovers in /dev/shm
    go()
    start = time.monotonic()
    loader = build_loader(writer, reader, data, workers)
    seen = nbytes = 0
    distinct: list[int] = []
    first = None
    for sizes, labels in loader:
        if first is None:
            first = time.monotonic() - start
        seen += len(labels)
        nbytes += int(sizes.sum())
        if len(labels) == BATCH:
            distinct.append(len(set(labels.tolist())))
        if seen >= samples or time.monotonic() - start > max_s:
            break
    seconds = time.monotonic() - start
    del loader  # workers stop here, outside the timed part
    return {
        "samples": seen,
        "bytes": nbytes,
        "seconds": seconds,
        "first_batch_s": first,
        "distinct": sum(distinct) / len(distinct) if distinct else None,
        "batches": len(distinct),
    }


_PROTOCOL: Any = None


def go() -> None:
    """Imports are done: say so and wait for the parent to make the data cold."""
    _PROTOCOL.write("ready\n")
    _PROTOCOL.flush()
    if sys.stdin.readline().strip() != "go":
        raise SystemExit(1)


def child(argv: list[str]) -> None:
    global _PROTOCOL
    # fd 1 is the protocol; the libraries' own output (progress bars) goes to stderr
    _PROTOCOL = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if argv[0] == "clean":  # the last streaming cell's shared memory
        import_streaming()
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        return
    try:
        if argv[0] == "convert":
            result = convert(argv[1], Path(argv[2]), Path(argv[3]), int(argv[4]))
        else:
            result = read_cell(argv[1], Path(argv[2]), int(argv[3]), int(argv[4]), float(argv[5]))
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)  # not held up by a library's threads either
    _PROTOCOL.write(json.dumps(result) + "\n")
    _PROTOCOL.flush()
    # done: no library's exit handlers (a peer's shared memory, threads) may hold the cell up;
    # the next reader of streaming clears what it leaves in /dev/shm
    os._exit(0)


# --- the parent ---


def make_dataset(root: Path, shape: Shape) -> int:
    rng = random.Random(0)
    total = 0
    for c in range(shape.classes):
        (root / f"class{c:04d}").mkdir(parents=True)
    for i in range(shape.files):
        size = rng.randint(shape.min_kb * 1000, shape.max_kb * 1000)
        (root / f"class{i % shape.classes:04d}" / f"{i:07d}.bin").write_bytes(rng.randbytes(size))
        total += size
    os.sync()
    return total


class TreeRss:
    """Peak of the summed RSS of a process and its descendants, sampled every 0.2 s (forked
    workers share pages, so the sum counts shared pages once per process: an upper bound)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self._stop = pid, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self._stop.wait(0.2):
            total = 0
            try:
                for proc in [root, *root.children(recursive=True)]:
                    with contextlib.suppress(psutil.Error):  # a worker that just left
                        total += proc.memory_info().rss
            except psutil.Error:
                return
            self.peak = max(self.peak, total)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def run_child(args: list[str], cold: Path, log: Path, group: Any, timeout: float) -> dict:
    """Start a child, put it in `group`, make `cold` cold once it is ready, let it go; its
    result with the wall time, load, peak RSS and the group's reads added."""
    from diskinfo.tune.cache import make_cold

    env = dict(
        os.environ,
        PYTHONPATH=f"{REPO / 'src'}:{REPO}",
        LITDATA_DISABLE_VERSION_CHECK="1",
    )
    with open(log, "a") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_loaders", "--child", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=REPO,
            env=env,
        )
    assert proc.stdin is not None and proc.stdout is not None
    rss = TreeRss(proc.pid)
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"did not start: {tail(log)}")
        if group is not None:
            group.add(proc.pid)
        make_cold([proc.pid], cold)
        time.sleep(1.0)
        load = os.getloadavg()[0]
        before = group.reads() if group is not None else None
        wall = time.monotonic()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        line = proc.stdout.readline()
        wall = time.monotonic() - wall
        after = group.reads() if group is not None else None
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        killer.cancel()
        peak = rss.stop()
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0 or not line.strip():
        raise RuntimeError(f"exit {proc.returncode}: {tail(log)}")
    result = json.loads(line)
    result.update(
        wall_s=wall,
        load=load,
        rss_tree_mb=peak / 2**20,
        rss_max_mb=usage.ru_maxrss / 1024,  # the largest single process, from wait4
    )
    if before is not None and after is not None:
        result["reads"], result["read_bytes"] = after[0] - before[0], after[1] - before[1]
    return result


def tail(log: Path) -> str:
    """The last lines the children wrote to stderr: a failed cell's reason, in one line."""
    lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    return " | ".join(lines[-3:])[-600:]


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def run_set(name: str, args: argparse.Namespace, resolved_for: Any) -> dict:
    from tests.helpers.loopdev import Blkio

    shape = SETS[name]
    if args.samples or args.files:  # a smaller run (a smoke test: --files 500)
        files = args.files or shape.files
        samples = min(args.samples or shape.samples, files)
        shape = Shape(files, shape.min_kb, shape.max_kb, min(shape.classes, files), samples)
    data = Path(args.dir) / name
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    # one copy of the tree (tar adds ~2 kB per sample); a shared disk keeps 1 GB besides
    copy = shape.files * ((shape.min_kb + shape.max_kb) / 2 * 1000 + 2048)
    log = data / "children.log"
    out: dict[str, Any] = {"shape": asdict(shape), "conversions": {}, "cells": []}
    try:
        t = time.monotonic()
        out["bytes"] = make_dataset(data / "src", shape)
        print(
            f"{name}: {shape.files:,} files, {out['bytes'] / 1e9:.2f} GB in "
            f"{time.monotonic() - t:.0f} s",
            flush=True,
        )
        resolved = resolved_for(data)
        counting = Blkio.make(f"loader-bench-{name}", resolved)
        capped = Blkio.make(f"loader-bench-{name}-capped", resolved, args.iops)
        per_shard = 0
        for writer in args.writers:
            try:
                free = shutil.disk_usage(data).free
                if free < copy * (2 if writer in PACKS else 1) + 1e9:  # pack: and its spill
                    raise RuntimeError(f"not run: {free / 1e9:.1f} GB free on a shared disk")
                r = run_child(
                    ["convert", writer, str(data / "src"), str(data / writer), str(per_shard)],
                    data / "src",
                    log,
                    counting,
                    args.convert_timeout,
                )
                r["output_bytes"] = du(data / writer)
                r["files"] = sum(1 for f in (data / writer).rglob("*") if f.is_file())
                if writer in PACKS:
                    manifest = json.loads((data / writer / "manifest.json").read_text())
                    r["shards"] = len(manifest["shards"])
                    r["mixing"] = manifest.get("mixing")
                    per_shard = math.ceil(shape.files / r["shards"])  # webdataset: as many
                if writer in args.timed_only:
                    shutil.rmtree(data / writer)  # room on a shared disk
            except Exception as exc:  # recorded; the run goes on
                r = {"error": str(exc)}
            out["conversions"][writer] = r
            print(f"{time.strftime('%H:%M:%S')} {name}: convert {writer}: {r}", flush=True)
        shutil.rmtree(data / "src")  # read no more: room on a shared disk
        pairs = [
            p
            for p in args.pairs.split(",")
            if p and PAIRS[p][0] in args.writers and PAIRS[p][0] not in args.timed_only
        ]
        groups = [(cap, w) for _ in range(args.repeat) for cap in args.caps for w in args.workers]
        for g, (cap, workers) in enumerate(groups):
            order = pairs[g % len(pairs) :] + pairs[: g % len(pairs)] if pairs else []
            for pair in order:
                writer = PAIRS[pair][0]
                cell: dict[str, Any] = {"pair": pair, "cap": cap, "workers": workers}
                if "error" in out["conversions"].get(writer, {"error": ""}):
                    cell["error"] = f"no {writer} output"
                else:
                    try:
                        cell.update(
                            run_child(
                                [
                                    "read",
                                    pair,
                                    str(data),
                                    str(workers),
                                    str(shape.samples),
                                    str(args.max_seconds),
                                ],
                                data / writer,
                                log,
                                capped if cap else counting,
                                args.max_seconds + args.timeout,
                            )
                        )
                    except Exception as exc:  # recorded; the run goes on
                        cell["error"] = str(exc)
                out["cells"].append(cell)
                rate_s = f"{rate(cell):,.0f} samples/s" if "error" not in cell else cell["error"]
                print(
                    f"{time.strftime('%H:%M:%S')} {name} cap={cap} w={workers} {pair}: {rate_s}",
                    flush=True,
                )
        for group in (counting, capped):
            if group is not None:
                group.remove()
    finally:
        subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_loaders", "--child", "clean"],
            cwd=REPO,
            check=False,
            capture_output=True,
        )
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)
    return out


def rate(cell: dict) -> float:
    return cell["samples"] / cell["seconds"]


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for dist in ("torch", "webdataset", "litdata", "mosaicml-streaming", "numpy"):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = "not installed"
    return found


def commit() -> str:
    run = subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    )
    return run.stdout.strip()


# --- the Markdown ---

NOTES = "<!-- notes below are written by hand and kept when the benchmark is run again -->"


def fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def conversion_table(conv: dict, source_bytes: int) -> list[str]:
    lines = [
        "| writer | time s | x fastest | MB/s | peak RSS, largest process MiB "
        "| peak RSS, process tree MiB | output MB | output files | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    times = [c["seconds"] for c in conv.values() if "seconds" in c]
    fastest = min(times) if times else None
    for writer, c in conv.items():
        if "error" in c:
            lines.append(f"| {writer} | failed: {c['error']} |||||||| ")
            continue
        lines.append(
            f"| {writer} | {c['seconds']:.1f} | {c['seconds'] / fastest:.2f} | "
            f"{source_bytes / c['seconds'] / 1e6:.1f} | {c['rss_max_mb']:.0f} | "
            f"{c['rss_tree_mb']:.0f} | {c['output_bytes'] / 1e6:.0f} | {c['files']} | "
            f"{c['load']:.1f} |"
        )
    lines += ["", *pack_ratios({w: c["seconds"] for w, c in conv.items() if "seconds" in c})]
    return lines


def pack_ratios(seconds: dict[str, float]) -> list[str]:
    """Each pack's time over the fastest peer writing shuffled shards, and over `tar -cf`."""
    peers = {w: t for w, t in seconds.items() if w in PEER_WRITERS}
    best = min(peers, key=peers.__getitem__) if peers else None
    lines = []
    for ours in PACKS:
        if ours not in seconds:
            continue
        said = []
        if best is not None:
            said.append(
                f"**{seconds[ours] / peers[best]:.2f}x** the time of the fastest peer writing "
                f"shuffled shards ({best})"
            )
        if "tar" in seconds:
            said.append(f"**{seconds[ours] / seconds['tar']:.2f}x** `tar -cf`'s")
        if said:
            lines.append(f"{ours}: {' and '.join(said)}.")
    return lines


def conversion_medians(runs: list[dict]) -> list[str]:
    """The median time of each writer over the runs it took part in, and pack's ratios on
    those medians: one run on a shared disk can be off by a third."""
    times: dict[str, list[float]] = {}
    for run in runs:
        for writer, c in run.items():
            if "seconds" in c:
                times.setdefault(writer, []).append(c["seconds"])
    medians = {w: statistics.median(t) for w, t in times.items()}
    said = ", ".join(f"{w} {m:.1f} s ({len(times[w])})" for w, m in medians.items())
    return [f"Medians over the runs (runs each): {said}.", "", *pack_ratios(medians)]


def cell_tables(cells: list[dict], shuffled: float) -> list[str]:
    pairs = list(dict.fromkeys(c["pair"] for c in cells))
    groups = list(dict.fromkeys((c["cap"], c["workers"]) for c in cells))
    runs: dict[tuple, list[dict]] = {}
    for c in cells:
        runs.setdefault((c["cap"], c["workers"], c["pair"]), []).append(c)
    # repeated cells: the run with the median rate stands for the cell (a failure only if
    # every run failed); "(n)" after a rate says how many runs it is the median of
    by = {}
    for key, found in runs.items():
        ok = sorted((c for c in found if "error" not in c), key=rate)
        by[key] = ok[(len(ok) - 1) // 2] if ok else found[0]
    count = {key: sum("error" not in c for c in found) for key, found in runs.items()}

    def label(cap: int, workers: int) -> str:
        return f"{'1,000 IOPS' if cap else 'uncapped'}, {workers} workers"

    head = "| cell | " + " | ".join(pairs) + " |"
    rule = "|---|" + "---:|" * len(pairs)
    ours = [p for p in OURS if p in pairs]
    lines = [
        f"Samples/s (higher is better); last column: {' and '.join(ours)} over the best peer.",
        "",
        head[:-1] + "| ours / best peer |",
        rule + "---|",
    ]
    for cap, workers in groups:
        row, rates = [], {}
        for pair in pairs:
            c = by.get((cap, workers, pair))
            if c is None or "error" in c:
                row.append("failed" if c else "-")
            else:
                rates[pair] = rate(c)
                n = count[(cap, workers, pair)]
                row.append(f"{rates[pair]:,.0f}" + (f" ({n})" if n > 1 else ""))
        peers = {p: r for p, r in rates.items() if PAIRS[p][1] != "ShardDataset"}
        mine = [p for p in ours if p in rates]
        if mine and peers:
            best = max(peers, key=peers.__getitem__)
            each = [f"**{rates[p] / peers[best]:.2f}x**" for p in mine]
            verdict = ", ".join(each) + f" ({best})"
        else:
            verdict = "-"
        lines.append(f"| {label(cap, workers)} | " + " | ".join(row) + f" | {verdict} |")

    def table(title: str, cell: Callable[[dict], str]) -> list[str]:
        """One row per (cap, workers), one column per pair: `cell` of each cell that ran."""
        out = ["", title, "", head, rule]
        for cap, workers in groups:
            row = []
            for pair in pairs:
                c = by.get((cap, workers, pair))
                row.append("-" if c is None or "error" in c else cell(c))
            out.append(f"| {label(cap, workers)} | " + " | ".join(row) + " |")
        return out

    def mix(c: dict) -> str:
        d = c.get("distinct")
        return "-" if d is None else f"{d:.2f} ({d / shuffled:.2f})"

    def reads(c: dict) -> str:
        n = c.get("reads") or 0
        kb = c["read_bytes"] / n / 1000 if n else None
        return (
            f"{n / c['seconds']:,.0f}/s x {fmt(kb)} kB, {fmt(c['first_batch_s'], 1)} s, "
            f"{c['load']:.1f}"
        )

    lines += table(
        f"Distinct classes per full batch of {BATCH} (a fully shuffled loader: "
        f"{shuffled:.2f}; the ratio to it in brackets):",
        mix,
    )
    lines += table(
        "Peak RSS of the reader's process tree, MiB (summed over processes; "
        "the largest single process in brackets):",
        lambda c: f"{c['rss_tree_mb']:,.0f} ({c['rss_max_mb']:,.0f})",
    )
    lines += table(
        "Reads the reader's process tree issued to the disk: reads/s and kB per read "
        "(its blkio group's counters, before merging), first batch after s, load:",
        reads,
    )
    failed = [c for c in cells if "error" in c]
    if failed:
        lines += ["", "Failed cells:", ""]
        lines += [f"- {label(c['cap'], c['workers'])}, {c['pair']}: `{c['error']}`" for c in failed]
    return lines


def render(everything: dict, path: Path) -> None:
    from diskinfo.shards.mixing import expected_distinct

    meta = everything["meta"]
    v = meta["versions"]
    lines = [
        "# diskinfo pack + ShardDataset beside webdataset, litdata and mosaicml-streaming",
        "",
        "`benchmarks/bench_loaders.py`; measured "
        f"{meta['date']} on {meta['host']} ({meta['cores']} cores, kernel {meta['kernel']}, "
        f"data on {meta['disk']}), commit `{meta['commit']}`; torch {v['torch']}, webdataset "
        f"{v['webdataset']}, litdata {v['litdata']}, mosaicml-streaming "
        f"{v['mosaicml-streaming']}, numpy {v['numpy']}.",
        "",
        "**Read the ratios within a row, not the absolute figures.** The machine has 2 cores "
        "shared with other jobs (the load average per cell is in the last table), so a cell's "
        "samples/s moves with the load; the cells of one row ran back to back, in an order "
        "rotated from row to row, so the load falls on every pair alike.",
        "",
        "How: each writer converts the same class-folder tree once, cold (sync and "
        "drop_caches=3 first), in a child whose time runs from after its imports to its output "
        "on disk (a final sync; `diskinfo pack` fsyncs and verifies each shard itself). The "
        "peer writers write the files in one order shuffled with seed 0 (pack shuffles with "
        "seed 0 itself), labels numbered as ImageFolder: `ShardWriter` with as many samples "
        'per shard as pack\'s shards hold; `optimize` with `chunk_bytes="64MB"` (it '
        "needs a size) and its default workers; `MDSWriter` with its defaults (64 MiB shards, "
        "no compression). Each read cell is one child process: imports, then the data is made "
        "cold (caches dropped, the child's code read back), then the dataset and DataLoader are "
        f"built and read, batch size {BATCH}, no training step, every sample reduced in the "
        "reader (worker) to its payload length and label; samples/s counts from building the "
        "dataset to the last batch, so start-up (index reads, worker start, first shard) is "
        "in it. Readers at their training shuffle: `ShardDataset` defaults (shard order "
        "shuffled, 1,000-sample buffer), `WebDataset(urls, shardshuffle=100).shuffle(1000)` "
        "(as docs/shards.md), litdata `StreamingDataset(shuffle=True)` with its "
        "`StreamingDataLoader`, streaming `StreamingDataset(local=..., shuffle=True, "
        f"batch_size={BATCH})` with a torch DataLoader. The 1,000-IOPS cap: the reader's process "
        "tree in a cgroup-v1 blkio group with `blkio.throttle.read_iops_device` 1000 on the "
        "data's disk (emulated request-limited storage, as in shards.md). Pairs: "
        "`writer+reader`; `wds` is webdataset's `ShardWriter`, `mds` streaming's `MDSWriter`. "
        "litdata and MDS files are read only by their own readers; both tar readers read both "
        "tar writers' shards. What a sample's payload is differs: `ShardDataset`, WebDataset "
        "and streaming hand out bytes (copied out of the file), litdata a `memoryview` into "
        "its mapped chunk (no copy, and not bytes: `json.loads`, `.decode()` and pickling "
        "refuse it); the per-sample work takes only the payload's length, so litdata never "
        "reads its payloads' bytes.",
        "",
        "mosaicml-streaming 0.13 is imported as `streaming.base` (the package's `__init__` "
        "imports `streaming.vision`, and so torchvision, whose PyPI wheel is linked against "
        "CUDA torch and fails beside torch's CPU build: `RuntimeError: operator "
        "torchvision::nms does not exist`); the writer and reader are those of the package. "
        "litdata and streaming were installed with `--no-deps` plus the modules they import "
        "(their pins would have downgraded the shared venv's numpy, transformers and "
        "paramiko).",
    ]
    for key, s in everything["sets"].items():
        shape = Shape(**s["shape"])
        classes = [shape.files // shape.classes] * shape.classes
        shuffled = expected_distinct(classes, BATCH)
        part = (
            "a full epoch"
            if shape.samples >= shape.files
            else (
                f"the first {shape.samples:,} samples "
                f"({shape.samples / shape.files:.0%} of an epoch)"
            )
        )
        lines += [
            "",
            f"## {key}: {shape.files:,} files of {shape.min_kb}-{shape.max_kb} kB in "
            f"{shape.classes:,} class folders ({s['bytes'] / 1e9:.2f} GB)",
            "",
            f"Each read cell reads {part}; measured {', '.join(s.get('dates', ['-']))} "
            f"at commit `{s.get('commit', '-')}`.",
            "",
            "### Conversion (cold, uncapped)",
            "",
            *conversion_table(s["conversions"], s["bytes"]),
        ]
        runs = [s["conversions"], *s.get("conversion_runs", [])]
        for i, again in enumerate(runs[1:], 2):
            times = ", ".join(
                f"{w} {c['seconds']:.1f} s" for w, c in again.items() if "seconds" in c
            )
            lines += ["", f"Run {i} of the conversions (only these writers): {times}."]
        if len(runs) > 1:
            lines += ["", *conversion_medians(runs)]
        for writer in PACKS:
            if mix := (s["conversions"].get(writer) or {}).get("mixing"):
                lines += [
                    "",
                    f"{writer}'s own prediction (manifest `mixing`): `{json.dumps(mix)}`.",
                ]
        if s["cells"]:
            lines += ["", "### Reading", "", *cell_tables(s["cells"], shuffled)]
    lines += ["", "Raw figures: `benchmarks/results/loaders.json`.", "", NOTES]
    previous = path.read_text() if path.exists() else ""
    notes = previous.rsplit(NOTES, 1)[1].lstrip("\n") if NOTES in previous else ""
    path.write_text("\n".join(lines) + "\n" + notes)


def main() -> None:
    parser = argparse.ArgumentParser(description="pack + ShardDataset beside three peers")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--sets", default="20k,200k")
    parser.add_argument("--pairs", default=",".join(p for p in PAIRS if "pack-key" not in p))
    parser.add_argument("--workers", default="0,2,4")
    parser.add_argument("--caps", default="0,1000", help="read IOPS caps, 0: none")
    parser.add_argument("--samples", type=int, default=0, help="per cell; default: per set")
    parser.add_argument("--files", type=int, default=0, help="default: per set")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="per read cell")
    parser.add_argument("--timeout", type=float, default=120.0, help="read cell, beyond max")
    parser.add_argument("--convert-timeout", type=float, default=900.0)
    parser.add_argument("--dir", default="/var/tmp/loader-bench")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "loaders.md"))
    parser.add_argument("--writers", default=",".join(w for w in WRITERS if w != "pack-key"))
    parser.add_argument(
        "--timed-only", default="wds-keyorder,tar", help="writers whose output is not read"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of every cell group")
    parser.add_argument("--merge", action="store_true", help="add to the set's earlier runs")
    parser.add_argument("--label", default="", help="store the set's results under this name")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--render", action="store_true", help="only write the Markdown")
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    out = Path(args.out)
    raw = out.with_suffix(".json")
    everything = json.loads(raw.read_text()) if raw.exists() else {"meta": {}, "sets": {}}
    if args.render:
        render(everything, out)
        return
    if os.geteuid() != 0:
        raise SystemExit("bench_loaders: needs root to drop the page cache and cap IOPS")
    args.workers = [int(w) for w in args.workers.split(",")]
    args.caps = [int(c) for c in args.caps.split(",")]
    args.iops = max(args.caps)
    args.writers = [w for w in args.writers.split(",") if w]
    args.timed_only = [w for w in args.timed_only.split(",") if w]
    unknown = [p for p in args.pairs.split(",") if p and p not in PAIRS]
    unknown += [s for s in args.sets.split(",") if s not in SETS]
    unknown += [w for w in args.writers + args.timed_only if w not in WRITERS]
    if unknown:
        raise SystemExit(
            f"bench_loaders: unknown {unknown}; pairs {list(PAIRS)}, sets {list(SETS)}"
        )

    def resolved_for(path: Path) -> dict:
        run = subprocess.run(
            [sys.executable, "-m", "diskinfo.cli", "resolve", str(path), "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(run.stdout)

    Path(args.dir).mkdir(parents=True, exist_ok=True)
    dev = resolved_for(Path(args.dir)).get("device") or {}
    everything["meta"] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "host": platform.node(),
        "cores": os.cpu_count(),
        "kernel": platform.release(),
        "disk": f"{dev.get('name', '?')} ({'rotational' if dev.get('rotational') else 'ssd'}"
        f"{', ' + dev['kind'] if dev.get('kind') else ''})",
        "commit": commit(),
        "versions": versions(),
    }
    for name in args.sets.split(","):
        found = run_set(name, args, resolved_for)
        key = args.label or name
        if args.merge and key in everything["sets"]:  # more runs of some cells: kept beside
            kept = everything["sets"][key]
            kept["cells"] += found["cells"]
            kept.setdefault("conversion_runs", []).append(found["conversions"])
        else:
            everything["sets"][key] = found
        everything["sets"][key].setdefault("dates", []).append(
            time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        )
        everything["sets"][key]["commit"] = commit()
        raw.write_text(json.dumps(everything, indent=1))
        render(everything, out)
        print(f"results: {out}", flush=True)


if __name__ == "__main__":
    main()
