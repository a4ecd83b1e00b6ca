"""Two revisions of src/ side by side, in one run on one machine: the monitor's CPU per sample
and ShardDataset's read rate, for a change that must not move either (a restructuring).

Each measurement runs in a child process that imports diskinfo from the revision's src/
(PYTHONPATH), A and B alternating round by round so that the machine's other load falls on
both alike; the figure is each side's median and the ratio B / A.

- monitor: CPU ms of one whole sample of `diskinfo watch` (every collector, the analyser and
  every sink, built as `diskinfo watch PATH` builds them), in the child, over --samples
  samples 20 ms apart after 20 to warm up; PATH is a small generated dataset.
- loader: samples/s of the best of ten passes of `ShardDataset(DEST, train=False)` over a pack
  of --files small files (4 KiB, 10 classes), warm page cache, num_workers 0: the reader's own
  cost.

    flock /tmp/bench.lock .venv/bin/python benchmarks/bench_ab.py --a ../main/src --b src \\
        --out benchmarks/results/ab-NAME.md
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def child_monitor(path: str, samples: int) -> float:
    from diskinfo.cli import build_parser
    from diskinfo.commands.watch import build_monitor
    from diskinfo.record import IntervalRecord

    log_dir = tempfile.mkdtemp(prefix="diskinfo-ab-")
    args = build_parser().parse_args(["watch", path, "--log-dir", log_dir, "--echo", "never"])
    held = contextlib.ExitStack()
    monitor = build_monitor(args, held)
    steps = [c.fill for c in monitor.collectors]
    steps += [monitor.analyser] if monitor.analyser is not None else []
    steps += [sink.write for sink in monitor.sinks]
    for c in monitor.collectors:
        c.start()
    used = 0.0
    try:
        for i in range(20 + samples):
            time.sleep(0.02)
            rec = IntervalRecord(ts=time.time(), elapsed_s=0.02)
            t = time.thread_time()
            for step in steps:
                step(rec)  # type: ignore[operator]
            if i >= 20:
                used += time.thread_time() - t
    finally:
        for c in monitor.collectors:
            c.stop()
        for sink in monitor.sinks:
            sink.close()
        held.close()
        shutil.rmtree(log_dir, ignore_errors=True)
    return used / samples * 1000


def child_loader(dest: str) -> float:
    from diskinfo.shards import ShardDataset

    ds = ShardDataset(dest, train=False)
    for _ in ds:  # a first pass: the page cache and the imports warm
        pass
    best = 0.0
    for _ in range(10):  # the best of ten passes: the one the machine's other load left alone
        t = time.perf_counter()
        n = sum(1 for _ in ds)
        best = max(best, n / (time.perf_counter() - t))
    return best


def measure(src: str, what: str, *args: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(Path(src).resolve()))
    out = subprocess.run(
        [sys.executable, __file__, "--child", what, *args],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(out.stdout.strip().splitlines()[-1])


def make_tree(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / f"class{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:07d}.jpg").write_bytes(os.urandom(4096))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", help="src/ of revision A (the reference)")
    ap.add_argument("--b", help="src/ of revision B")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--samples", type=int, default=100, help="monitor samples per round")
    ap.add_argument("--files", type=int, default=20_000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        what, *rest = args.child
        value = child_monitor(rest[0], int(rest[1])) if what == "monitor" else child_loader(rest[0])
        print(value)
        return 0
    if not (args.a and args.b):
        ap.error("give --a and --b: the two revisions' src/")
    work = Path(tempfile.mkdtemp(prefix="diskinfo-ab-"))
    try:
        make_tree(work / "watched", 1000)
        make_tree(work / "src", args.files)
        subprocess.run(
            [sys.executable, "-m", "diskinfo.cli", "pack", str(work / "src"), str(work / "pack")],
            env=dict(os.environ, PYTHONPATH=str(Path(args.b).resolve())),
            check=True, capture_output=True,
        )  # fmt: skip
        rows: dict[str, dict[str, list[float]]] = {"monitor": {}, "loader": {}}
        for _ in range(args.rounds):
            for side, src in (("A", args.a), ("B", args.b)):
                cpu = measure(src, "monitor", str(work / "watched"), str(args.samples))
                rows["monitor"].setdefault(side, []).append(cpu)
                rate = measure(src, "loader", str(work / "pack"))
                rows["loader"].setdefault(side, []).append(rate)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [
        "# Two revisions side by side (bench_ab.py)",
        "",
        f"A: `{args.a}`, B: `{args.b}`; {args.rounds} rounds, A and B alternating; "
        f"{platform.node()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| figure | A (median) | B (median) | B / A | A rounds | B rounds |",
        "|---|---|---|---|---|---|",
    ]
    names = {
        "monitor": f"monitor CPU per sample, ms ({args.samples} samples, 20 ms apart)",
        "loader": f"ShardDataset samples/s, best of 10 passes ({args.files} files of 4 KiB, warm)",
    }
    for key, sides in rows.items():
        a, b = statistics.median(sides["A"]), statistics.median(sides["B"])
        shown = lambda xs: ", ".join(f"{x:.3g}" for x in xs)  # noqa: E731
        lines.append(
            f"| {names[key]} | {a:.3g} | {b:.3g} | {b / a:.3f} | {shown(sides['A'])} | "
            f"{shown(sides['B'])} |"
        )
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
