"""Cold-cache read throughput: many small files vs. the same data packed into tar shards.

    sudo .venv/bin/python -m benchmarks.bench_shards             # 20,000 files of 10-200 KB
    sudo .venv/bin/python -m benchmarks.bench_shards --files 2000 --out /tmp/shards.md

(from the repository's root: the blkio group comes from tests.helpers.loopdev)

Creates a small-file dataset (ImageFolder layout, random sizes), packs it with
`diskinfo pack`, then for each run: starts a reader child (one epoch, its DataLoader wrapped
with `diskinfo.torch.watch`) in its own blkio cgroup, starts `diskinfo watch` on the data
(1 s intervals, --pid-file on the reader), makes the data cold (make_cold), and says go.
Runs: (a) a map-style dataset of individual files, shuffled, num_workers 0, 2 and 4;
(b) ShardDataset over the shards (its training defaults), num_workers 0, 2 and 4; (c) the
`webdataset` library over the same shards, 2 workers. `--iops-limit N` repeats some runs with
the reader's read IOPS capped by blkio throttling (emulated network/cloud storage). The pack
and the reader use their defaults, so the figures are what a new user gets.

The loop only reads (each sample is reduced to its length in the worker), so every run is
input-bound by construction: the verdict says which kind, and the monitor's IOPS, request
size and await say why. `--step-ms` adds a sleeping "GPU step" per batch. Writes a Markdown
table with the monitor's figures and verdicts, `diskinfo report` of files-w0 vs shards-w0,
and each run's JSONL next to it. Needs root (drop_caches, cgroups).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from diskinfo import logfiles
from diskinfo.tune.cache import make_cold
from tests.helpers.loopdev import Blkio

REPO = Path(__file__).resolve().parent.parent
RUNS = {
    "files-w0": ("files", 0),
    "files-w2": ("files", 2),
    "files-w4": ("files", 4),
    "shards-w0": ("shards", 0),
    "shards-w2": ("shards", 2),
    "shards-w4": ("shards", 4),
    "webdataset-w2": ("webdataset", 2),
}


# --- the child: one epoch of reading, timed, with the loop's data-wait published ---


def sample_size(sample: dict) -> int:
    return sum(len(v) for k, v in sample.items() if not k.startswith("__") and k != "cls")


class FileDataset:
    """Map-style, one file per sample: what an ImageFolder-like Dataset does on disk."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> int:
        with open(self.paths[index], "rb") as fh:
            return len(fh.read())


def child(kind: str, workers: int, data: Path, step_ms: float, batch: int) -> None:
    import torch.utils.data

    import diskinfo.torch

    if kind == "files":
        paths = sorted(str(p) for p in (data / "files").rglob("*.bin"))
        dataset = FileDataset(paths)
        gen = torch.Generator().manual_seed(0)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=batch, shuffle=True, num_workers=workers, generator=gen
        )
    elif kind == "shards":
        from diskinfo.shards import ShardDataset

        dataset = ShardDataset(data / "shards", transform=sample_size)
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=workers)
    else:
        import webdataset as wds

        from diskinfo.shards.pack import read_manifest

        manifest = read_manifest(data / "shards")
        urls = [str(data / "shards" / s["name"]) for s in manifest["shards"]]
        dataset = wds.WebDataset(urls, shardshuffle=False).map(sample_size)
        loader = torch.utils.data.DataLoader(dataset, batch_size=batch, num_workers=workers)
    loader = diskinfo.torch.watch(loader)
    print("ready", flush=True)  # imports done: the parent starts the monitor, drops the cache
    if sys.stdin.readline().strip() != "go":
        raise SystemExit(1)  # the parent gave up
    start = time.monotonic()
    samples = nbytes = 0
    for sizes in loader:
        samples += len(sizes)
        nbytes += int(sizes.sum())
        if step_ms:
            time.sleep(step_ms / 1000)
    seconds = time.monotonic() - start
    time.sleep(1.0)  # let the publisher write the last loader figures
    print(json.dumps({"samples": samples, "bytes": nbytes, "seconds": seconds}), flush=True)


# --- the parent ---


def make_dataset(root: Path, files: int, min_kb: int, max_kb: int, classes: int = 10) -> int:
    rng = random.Random(0)
    total = 0
    for i in range(files):
        folder = root / f"class{i % classes:02d}"
        if i < classes:
            folder.mkdir(parents=True, exist_ok=True)
        size = rng.randint(min_kb * 1024, max_kb * 1024)
        (folder / f"{i:06d}.bin").write_bytes(rng.randbytes(size))
        total += size
    return total


def diskinfo(*args: str, **kw) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "diskinfo.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True, **kw)


def one_run(
    name: str,
    data: Path,
    logs: Path,
    args: argparse.Namespace,
    group: Blkio | None = None,
    capped: bool = False,
) -> dict:
    """One cold epoch under the monitor, the reader in `group` (its own I/O accounting)."""
    kind, workers = RUNS[name]
    if capped:
        name = f"{name}-{args.iops_limit}iops"
    run_dir = data / "runs" / name  # the monitor's own log directory; only the JSONL is kept
    shutil.rmtree(run_dir, ignore_errors=True)
    (run_dir / "state").mkdir(parents=True)
    env = dict(os.environ, DISKINFO_STATE_DIR=str(run_dir / "state"))
    reader = subprocess.Popen(
        [
            *(
                sys.executable,
                "-m",
                "benchmarks.bench_shards",
                "--child",
                kind,
                str(workers),
                str(data),
            ),
            *("--step-ms", str(args.step_ms), "--batch", str(args.batch)),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,  # the child imports benchmarks.* and tests.helpers.*
    )
    assert reader.stdin is not None and reader.stdout is not None
    if reader.stdout.readline().strip() != "ready":
        raise SystemExit(f"bench_shards: run {name}: the reader did not start")
    if group is not None:  # before the epoch: the DataLoader workers fork into it too
        group.add(reader.pid)
    (run_dir / "train.pid").write_text(f"{reader.pid}\n")
    watched = data / ("files" if kind == "files" else "shards")
    watch = subprocess.Popen(
        [
            *(sys.executable, "-m", "diskinfo.cli", "watch", str(watched), "--interval", "1"),
            *("--log-dir", str(run_dir), "--pid-file", str(run_dir / "train.pid")),
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(run_dir / "watch.stderr", "w"),  # noqa: SIM115 - closed with the process
        env=env,
    )
    jsonl = run_dir / logfiles.JSONL
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not jsonl.exists() or jsonl.read_text().count("\n") < 2):
        time.sleep(0.2)  # two intervals recorded: the monitor's start-up walk of the data is done
    make_cold([reader.pid, watch.pid], data)
    time.sleep(2.0)  # quiet intervals before the epoch
    load = os.getloadavg()[0]  # other work on the machine competes for CPU and disk
    before = group.reads() if group is not None else None
    reader.stdin.write("go\n")
    reader.stdin.flush()
    out, _ = reader.communicate(timeout=args.timeout)
    after = group.reads() if group is not None else None
    if reader.returncode != 0:
        watch.terminate()
        raise SystemExit(f"bench_shards: run {name} failed (exit {reader.returncode})")
    time.sleep(1.5)
    watch.send_signal(signal.SIGTERM)
    watch.wait(timeout=30)
    result = json.loads(out.strip().splitlines()[-1])
    shutil.copy(jsonl, logs / f"{name}.jsonl")
    report = json.loads(diskinfo("report", str(jsonl), "--json", "--no-png").stdout)["runs"][0]
    busy = busy_records(jsonl)
    own = None
    if before is not None and after is not None and after[0] > before[0]:
        n, nbytes = after[0] - before[0], after[1] - before[1]
        own = {"reads": n, "bytes": nbytes, "r_s": n / result["seconds"], "kb": nbytes / n / 1024}
    return {"name": name, **result, "load": load, "own": own, "report": report, "busy": busy}


def busy_records(jsonl: Path) -> dict:
    """Monitor figures over the intervals in which the loop ran (batches were delivered)."""
    from diskinfo.analyse.signals import busiest_device
    from diskinfo.report import load_run, summarise

    records = load_run(jsonl)
    reading = [r for r in records if r.loader is not None and r.loader.batches > 0]
    # storage bytes of the reader's tree: the main process's counter includes its reaped
    # DataLoader workers, so its last value minus its value before the epoch is the tree's
    first = records.index(reading[0]) if reading else 0
    mains = [
        p.read_bytes_total
        for r in records[max(first - 1, 0) :]
        for p in r.procs
        if p.role == "main"
    ]
    if not reading:
        return {}
    s = summarise(reading)
    aqu = [d.aqu_sz for r in reading if (d := busiest_device(r)) is not None]
    return {
        "intervals": len(reading),
        "mb_s": s.disk_read_mb_s,
        "r_s": s.disk_r_s,
        "rareq_kb": s.disk_rareq_kb,
        "r_await_ms": s.disk_r_await_ms,
        "util": s.disk_util,
        "aqu_sz": sum(aqu) / len(aqu),
        "verdicts": s.verdict_shares,
        "top_fix": s.top_fix,
        "wait_share": s.wait_share,
        "reader_bytes": mains[-1] - mains[0] if len(mains) > 1 else None,
    }


NOTES = "<!-- notes below are written by hand and kept when the benchmark is run again -->"


def fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table(results: list[dict]) -> list[str]:
    base = next((r for r in results if r["name"].startswith("files-w0")), results[0])
    lines = [
        f"| run | samples/s | MB/s (loop) | x {base['name']} | reader reads/s | reader kB/read "
        "| from disk | disk MB/s | r/s | kB/read | r_await ms | aqu-sz | %util | data-wait | load "
        "| verdict (share of loop time) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        b = r["busy"]
        verdicts = ", ".join(f"{v} {s * 100:.0f}%" for v, s in b.get("verdicts", {}).items())
        lines.append(
            f"| {r['name']} | {fmt(r['samples'] / r['seconds'])} | "
            f"{fmt(r['bytes'] / r['seconds'] / 2**20, 1)} | {rate(r) / rate(base):.2f} | "
            f"{fmt((r.get('own') or {}).get('r_s'))} | {fmt((r.get('own') or {}).get('kb'))} | "
            f"{from_disk(r)} | "
            f"{fmt(b.get('mb_s'), 1)} | {fmt(b.get('r_s'))} | {fmt(b.get('rareq_kb'))} | "
            f"{fmt(b.get('r_await_ms'), 2)} | {fmt(b.get('aqu_sz'), 2)} | {fmt(b.get('util'))} | "
            f"{fmt((b.get('wait_share') or 0) * 100)}% | {r['load']:.1f} | "
            f"{verdicts or 'no verdict recorded'} |"
        )
    files = [r for r in results if r["name"].startswith("files")]
    shards = [r for r in results if "shards" in r["name"]]
    if files and shards:
        bf, bs = max(files, key=rate), max(shards, key=rate)
        lines += [
            "",
            f"Ratio: best shard run ({bs['name']}) / best file run ({bf['name']}) = "
            f"**{rate(bs) / rate(bf):.2f}x** samples/s; {shards[0]['name']} / {files[0]['name']}"
            f" = **{rate(shards[0]) / rate(files[0]):.2f}x**.",
        ]
    pairs = [
        (f, s)
        for f in files
        for s in shards
        if s["name"].startswith("shards") and RUNS[base_name(f)][1] == RUNS[base_name(s)][1]
    ]
    if pairs:
        lines += [
            "",
            "At equal workers (shards / files): "
            + ", ".join(
                f"{RUNS[base_name(f)][1]} workers **{rate(s) / rate(f):.2f}x**" for f, s in pairs
            )
            + ".",
        ]
    lines += ["", "Top fix the monitor named per run:", ""]
    lines += [f"- {r['name']}: {r['busy'].get('top_fix') or 'none'}" for r in results]
    return lines


def write_results(
    path: Path, results: list[dict], throttled: list[dict], meta: dict, compare: dict[str, str]
) -> None:
    lines = [
        "# Small files vs. shards, cold cache (benchmarks/bench_shards.py)",
        "",
        f"Measured {meta['date']} on {meta['host']}: {meta['cores']} cores, kernel "
        f"{meta['kernel']}, dataset on `{meta['device']}, {meta['fs']} (queue: {meta['queue']}). "
        f"Dataset: {meta['files']:,} files of {meta['min_kb']}-{meta['max_kb']} KB "
        f"({meta['bytes'] / 1e9:.2f} GB) in {meta['classes']} class directories; packed into "
        f"{meta['shards']} shards of {meta['per_shard'][0]}-{meta['per_shard'][1]} samples by "
        f"`diskinfo pack`'s defaults (shuffled, seed 0; {meta['shard_rule']}) in "
        f"{meta['pack_s']:.0f} s; read with `ShardDataset`'s defaults (shard order shuffled per "
        "epoch, 1,000-sample shuffle buffer per worker). "
        "Before every run the page cache, dentries and inodes were dropped (drop_caches=3) and "
        "the files mapped by the reader and the monitor (python, torch's libraries) read back, "
        "so the data is cold and the code is not; "
        f"batch {meta['batch']}, simulated step {meta['step_ms']} ms. `diskinfo watch "
        "--interval 1` recorded each run; its figures below are over the intervals in which "
        "the loop delivered batches.",
        "",
        "MB/s is MiB/s (2^20 bytes), as iostat -m and the monitor report it. `from disk`: bytes "
        "the reader's process tree fetched from storage (/proc/PID/io read_bytes) over the "
        "payload: about 100% means the cache really was cold. The disk columns are the whole "
        "device (`iostat -x` figures), other processes' I/O included; `load`: the 1-minute load "
        "average when the run started (this machine is shared). `reader reads/s` and `reader "
        "kB/read`: the read I/Os the reader's process tree alone issued to the device and their "
        "mean size, from its blkio cgroup's counters (bios, before the block layer merges "
        "them), over the loop's wall time.",
        "",
        "## This machine's disk, as it is",
        "",
        *table(results),
    ]
    if throttled:
        lines += [
            "",
            f"## The same disk capped at {meta['iops_limit']:,} read IOPS (emulated)",
            "",
            "The reader's process tree ran in a cgroup-v1 blkio group with "
            f"`blkio.throttle.read_iops_device` = {meta['iops_limit']} on the dataset's device "
            "and no bandwidth cap: the request-rate limit of network and cloud block storage "
            "(and, loosely, of a seeking hard disk). Emulated, not measured on such storage.",
            "",
            *table(throttled),
        ]
    for title, text in compare.items():
        lines += ["", f"`diskinfo report {title}` (whole runs, idle edges included):", ""]
        lines += ["```", text, "```"]
    lines += [
        "",
        "Raw JSONL per run: `benchmarks/results/shards/` (`diskinfo report A.jsonl B.jsonl`).",
        "",
        NOTES,
    ]
    previous = path.read_text() if path.exists() else ""
    notes = previous.rsplit(NOTES, 1)[1].lstrip("\n") if NOTES in previous else ""
    path.write_text("\n".join(lines) + "\n" + notes)


def from_disk(r: dict) -> str:
    """Share of the payload the reader's process tree fetched from storage (cold: ~100%)."""
    fetched = r["busy"].get("reader_bytes")
    return "-" if fetched is None or not r["bytes"] else f"{fetched / r['bytes'] * 100:.0f}%"


def base_name(r: dict) -> str:
    """'files-w2-1000iops' -> 'files-w2'."""
    return "-".join(r["name"].split("-")[:2])


def rate(r: dict) -> float:
    return r["samples"] / r["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description="small files vs. shards, cold cache")
    parser.add_argument("--child", nargs=3, metavar=("KIND", "WORKERS", "DATA"), help="internal")
    parser.add_argument("--dir", default="/var/tmp/diskinfo-bench-shards", help="dataset dir")
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--min-kb", type=int, default=10)
    parser.add_argument("--max-kb", type=int, default=200)
    parser.add_argument("--shard-size", default=None, help="default: diskinfo pack's default")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--step-ms", type=float, default=0.0)
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated run names")
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "shards.md"))
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument(
        "--iops-limit", type=int, default=0, help="also run capped at N read IOPS (blkio)"
    )
    parser.add_argument(
        "--throttled-runs", default="files-w0,files-w2,files-w4,shards-w0,shards-w2,shards-w4"
    )
    parser.add_argument("--keep", action="store_true", help="keep the dataset afterwards")
    args = parser.parse_args()
    if args.child:
        kind, workers, data = args.child
        child(kind, int(workers), Path(data), args.step_ms, args.batch)
        return
    if os.geteuid() != 0:
        raise SystemExit("bench_shards: needs root to drop the page cache")
    names = [n for n in args.runs.split(",") if n]
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        raise SystemExit(f"bench_shards: unknown runs {unknown}; known: {', '.join(RUNS)}")

    data = Path(args.dir)
    out = Path(args.out)
    logs = out.parent / out.stem
    logs.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    try:
        t = time.monotonic()
        nbytes = make_dataset(data / "files", args.files, args.min_kb, args.max_kb)
        print(f"dataset: {args.files} files, {nbytes / 1e9:.2f} GB in {time.monotonic() - t:.0f} s")
        t = time.monotonic()
        sizing = ["--shard-size", args.shard_size] if args.shard_size else []
        diskinfo("pack", str(data / "files"), str(data / "shards"), *sizing)
        pack_s = time.monotonic() - t
        manifest = json.loads((data / "shards" / "manifest.json").read_text())
        print(f"packed into {len(manifest['shards'])} shards in {pack_s:.0f} s")
        resolved = json.loads(diskinfo("resolve", str(data), "--json").stdout)
        results = []
        group = Blkio.make("diskinfo-bench-shards", resolved)
        for name in names:
            result = one_run(name, data, logs, args, group)
            print(
                f"{name}: {rate(result):,.0f} samples/s, "
                f"{result['bytes'] / result['seconds'] / 2**20:.1f} MB/s, "
                f"verdicts {result['busy'].get('verdicts')}",
                flush=True,
            )
            results.append(result)
        if group is not None:
            group.remove()
        throttled = []
        if args.iops_limit:
            capped = Blkio.make("diskinfo-bench-shards-capped", resolved, args.iops_limit)
            try:
                for name in args.throttled_runs.split(","):
                    result = one_run(name, data, logs, args, capped, capped=True)
                    print(f"{result['name']}: {rate(result):,.0f} samples/s", flush=True)
                    throttled.append(result)
            finally:
                if capped is not None:
                    capped.remove()
        compare = {}
        for group in (results, throttled):
            a = next((r["name"] for r in group if r["name"].startswith("files-w0")), None)
            b = next((r["name"] for r in group if r["name"].startswith("shards-w0")), None)
            if a and b:
                compare[f"{a}.jsonl {b}.jsonl"] = diskinfo(
                    "report",
                    *(f"{a}.jsonl", f"{b}.jsonl", "--png", f"{a}-vs-{b}.png"),
                    cwd=logs,
                ).stdout.strip()
        meta = {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "host": platform.node(),
            "cores": os.cpu_count(),
            "kernel": platform.release(),
            "device": describe_device(resolved),
            "queue": queue_settings(resolved),
            "fs": describe_fs(resolved),
            "files": args.files,
            "min_kb": args.min_kb,
            "max_kb": args.max_kb,
            "bytes": nbytes,
            "classes": 10,
            "shards": len(manifest["shards"]),
            "shard_rule": manifest["shard_rule"],
            "per_shard": manifest["samples_per_shard"],
            "pack_s": pack_s,
            "batch": args.batch,
            "step_ms": args.step_ms,
            "iops_limit": args.iops_limit,
        }
        write_results(out, results, throttled, meta, compare)
        everything = {"meta": meta, "runs": results, "throttled": throttled}
        (logs / "results.json").write_text(json.dumps(everything, indent=1))
        print(f"results: {out}")
    finally:
        if not args.keep:
            shutil.rmtree(data, ignore_errors=True)


def describe_device(resolved: dict) -> str:
    dev = resolved.get("device") or {}
    rot = {True: "rotational", False: "non-rotational"}.get(dev.get("rotational"), "")
    size = f"{dev['size_bytes'] / 2**30:.0f} GiB" if dev.get("size_bytes") else ""
    details = ", ".join(x for x in (dev.get("kind"), rot, size, dev.get("model")) if x)
    return f"{dev.get('name', '?')}` ({details})" if details else f"{dev.get('name', '?')}`"


def queue_settings(resolved: dict) -> str:
    name = (resolved.get("device") or {}).get("name", "")
    parts = []
    for key in ("scheduler", "read_ahead_kb", "max_sectors_kb", "nr_requests"):
        with contextlib.suppress(OSError):
            value = Path(f"/sys/block/{name}/queue/{key}").read_text().strip()
            if "[" in value:  # "none [mq-deadline] kyber": the one in use
                value = value.split("[", 1)[1].split("]", 1)[0]
            parts.append(f"{key} {value}")
    return ", ".join(parts)


def describe_fs(resolved: dict) -> str:
    mount = resolved.get("mount") or {}
    return f"{mount.get('fstype', '?')} on {mount.get('mountpoint', '?')}"


if __name__ == "__main__":
    main()
