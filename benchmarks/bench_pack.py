"""`diskinfo pack`'s peak memory by the number of files, and its time beside `tar -cf` of the
same tree, cold cache.

    .venv/bin/python -m benchmarks.bench_pack --root /var/tmp/bench-pack \\
        --out benchmarks/results/pack.md [--baseline-src OLD/src] [--million]

(as root, from the repository's root.) Grows one ImageFolder tree (1,000 class folders,
files of 1-8 kB of random bytes) through --sizes; at each size packs it with the defaults
in a child process and records the child's peak RSS (ru_maxrss), with this checkout's code
and, given --baseline-src, another checkout's (the shards' sha256 are compared too). At
--timed files: `tar -cf` and `diskinfo pack` of the tree, interleaved, --pairs times each,
each after `sync` and drop_caches=3 (page cache, dentries, inodes), with the 1-minute load
average at its start: the machine may be shared, and the ratio within a pair is what
counts. --million: 1,000,000 empty files in 1,000 folders, peak RSS only (the files' sizes
do not change the memory: the bytes in flight are bounded; empty files keep the disk needed
to the shards' headers). Everything under --root is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLASSES = 1000
CHILD = """
import json, resource, sys, time
from diskinfo.shards.pack import pack
t = time.monotonic()
m = pack(sys.argv[1], sys.argv[2], progress=False)
print(json.dumps({"rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "seconds": time.monotonic() - t,
                  "sha256": [s["sha256"] for s in m["shards"]], "mixing": m["mixing"]}))
"""


def grow(src: Path, start: int, stop: int, empty: bool = False) -> None:
    """Files start..stop-1 of the tree: file i in class folder i % CLASSES, 1-8 kB."""
    rng = random.Random(start)
    for i in range(start, stop):
        folder = src / f"class{i % CLASSES:04d}"
        if i < CLASSES:
            folder.mkdir(parents=True, exist_ok=True)
        data = b"" if empty else rng.randbytes(rng.randint(1000, 8000))
        (folder / f"{i:07d}.bin").write_bytes(data)


def packed(code: Path, src: Path, dest: Path) -> dict:
    """One pack in a child running `code`'s diskinfo: its peak RSS, time, shards."""
    shutil.rmtree(dest, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(code)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(src), str(dest)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    shutil.rmtree(dest, ignore_errors=True)
    if proc.returncode:
        raise SystemExit(f"pack failed: {proc.stderr.strip()[-2000:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def cold() -> float:
    """Drop the caches; the load average the run starts under."""
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    return os.getloadavg()[0]


def timed(command: list[str], env: dict[str, str]) -> float:
    start = time.monotonic()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.monotonic() - start


def pairs(code: Path, src: Path, out: Path, count: int) -> list[dict]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    pack = [sys.executable, "-m", "diskinfo.cli", "pack", str(src), str(out / "shards")]
    results = []
    for _ in range(count):
        row = {}
        for name, command in (("tar", ["tar", "-cf", str(out / "t.tar"), "-C", str(src), "."]),
                              ("pack", pack)):  # fmt: skip
            row[f"{name}_load"] = cold()
            row[name] = timed(command, env)
            (out / "t.tar").unlink(missing_ok=True)
            shutil.rmtree(out / "shards", ignore_errors=True)
        row["ratio"] = row["pack"] / row["tar"]
        results.append(row)
        print(json.dumps(row), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path("/var/tmp/bench-pack"))
    parser.add_argument("--sizes", default="50000,100000,200000")
    parser.add_argument("--timed", type=int, default=200_000, help="0: no timed pairs")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src/ to compare")
    parser.add_argument("--million", action="store_true")
    parser.add_argument("--million-pairs", type=int, default=0, help="timed pairs at 1,000,000")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/pack.md")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(",") if s)
    code = REPO / "src"
    src, out = args.root / "src", args.root / "out"
    shutil.rmtree(args.root, ignore_errors=True)
    out.mkdir(parents=True)
    rows: list[dict] = []
    timing: list[dict] = []
    million: list[dict] = []
    try:
        tiny = args.root / "tiny"
        grow(tiny, 0, 10)
        floor = packed(code, tiny, out / "p")["rss_kib"]
        done = 0
        for size in sizes:
            grow(src, done, size)
            done = size
            row: dict = {
                "files": size,
                "load": os.getloadavg()[0],
                "new": packed(code, src, out / "p"),
            }
            if args.baseline_src:
                row["old"] = packed(args.baseline_src, src, out / "p")
                row["same_shards"] = row["old"]["sha256"] == row["new"]["sha256"]
                row["same_mixing"] = row["old"]["mixing"] == row["new"]["mixing"]
            rows.append(row)
            brief = {k: v for k, v in row.items() if k not in ("new", "old")}
            brief["rss_new"] = row["new"]["rss_kib"]
            brief["rss_old"] = row.get("old", {}).get("rss_kib")
            print(json.dumps(brief), flush=True)
            if size == args.timed:
                timing = pairs(code, src, out, args.pairs)
        if args.million:
            shutil.rmtree(src)
            grow(src, 0, 1_000_000, empty=True)
            row = {"files": 1_000_000, "empty": True, "load": os.getloadavg()[0],
                   "new": packed(code, src, out / "p")}  # fmt: skip
            rows.append(row)
            print(json.dumps({"files": 1_000_000, "rss_new": row["new"]["rss_kib"]}), flush=True)
            million = pairs(code, src, out, args.million_pairs)
    finally:
        shutil.rmtree(args.root, ignore_errors=True)
    write(args.out, floor, rows, {args.timed: timing, 1_000_000: million}, args)


def write(path: Path, floor: int, rows: list[dict], timing: dict[int, list[dict]], args) -> None:
    mib = lambda kib: f"{kib / 1024:.0f}"  # noqa: E731
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = "| files | load | peak RSS MiB | KiB per 1,000 files over 10 files | seconds (warm) |"
    rule = "|---:|---:|---:|---:|---:|"
    if args.baseline_src:
        head += " old peak RSS MiB | old seconds | same shards (sha256) | same `mixing` |"
        rule += "---:|---:|---|---|"
    lines = [
        "# `diskinfo pack`: peak memory by files, time beside `tar -cf` (bench_pack.py)",
        "",
        f"Measured {stamp} on {os.uname().nodename}: {os.cpu_count()} cores, kernel "
        f"{os.uname().release}, tree on the filesystem of {args.root}. Tree: ImageFolder, "
        f"{CLASSES:,} class folders, files of 1-8 kB of random bytes (the 1,000,000 row: empty "
        "files). Peak RSS: `ru_maxrss` of a child that imports diskinfo and packs with the "
        f"defaults (64 shards, shuffled, seed 0), warm cache; a pack of 10 files: {mib(floor)} MiB "
        "(the interpreter and the modules). `load`: the 1-minute load average (2 cores, "
        "shared with other work).",
        "",
        head,
        rule,
    ]
    for r in rows:
        new = r["new"]
        line = (
            f"| {r['files']:,}{' (empty)' if r.get('empty') else ''} | {r['load']:.1f} | "
            f"{mib(new['rss_kib'])} | {(new['rss_kib'] - floor) * 1000 / r['files']:.1f} | "
            f"{new['seconds']:.1f} |"
        )
        if "old" in r:
            old = r["old"]
            line += (
                f" {mib(old['rss_kib'])} | {old['seconds']:.1f} | "
                f"{'yes' if r['same_shards'] else 'NO'} | {'yes' if r['same_mixing'] else 'NO'} |"
            )
        elif args.baseline_src:
            line += " - | - | - | - |"
        lines.append(line)
    for files, runs in timing.items():
        if not runs:
            continue
        lines += [
            "",
            f"Cold cache, {files:,} files{' (empty)' if files == 1_000_000 else ''}, `tar -cf` "
            "of the tree to a file and `diskinfo pack` of it (the CLI, defaults), both into the "
            "same folder, interleaved; `sync` and drop_caches=3 before each.",
            "",
            "| pair | tar s | load | pack s | load | pack / tar |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for i, t in enumerate(runs, 1):
            lines.append(
                f"| {i} | {t['tar']:.1f} | {t['tar_load']:.1f} | {t['pack']:.1f} | "
                f"{t['pack_load']:.1f} | **{t['ratio']:.2f}x** |"
            )
    lines += ["", "Raw: " + json.dumps({"floor_kib": floor, "rows": [
        {k: ({kk: vv for kk, vv in v.items() if kk != "sha256"} if isinstance(v, dict) else v)
         for k, v in r.items()} for r in rows], "timing": timing})]  # fmt: skip
    notes = ""
    if path.exists() and (mark := "<!-- notes") in (old := path.read_text()):
        notes = old[old.index(mark) :]
    path.write_text("\n".join(lines) + "\n" + ("\n" + notes if notes else ""))


if __name__ == "__main__":
    main()
