"""The monitor's GPU collector and verdict on a load in known patterns; run by gpu-check.sh.

Each pattern runs a training loop wrapped with diskinfo.torch.watch for a while, in this
process: steady (the step always runs), pulsing (the loop waits for data half of each
second), idle (the loop holds the GPU and does nothing), several (steady on GPU 0 of a node
with more GPUs: the others must be shown unused and never judged). With torch and CUDA the
step runs matrix products on the GPU; without them (the NVML stand-in on a machine without a
GPU, docs/gpu.md) it sleeps and the stand-in's scenario supplies the utilisation.

Needs only Python, nvidia-ml-py and this repository's src/ (no Docker, no network). Writes a
JSON report and prints a table; exit status 1 when a pattern's verdict is not the expected one.
    PYTHONPATH=src python3 scripts/gpu_patterns.py --report OUT.json [--patterns steady,...]
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from diskinfo import loader_state
from diskinfo.analyse.verdict import decide
from diskinfo.collectors.gpu import GpuCollector
from diskinfo.collectors.loader import LoaderCollector
from diskinfo.record import IntervalRecord, ProcessIO
from diskinfo.sources.nvml import Nvml

INTERVAL_S = 2.0
# pattern -> (share of each second the loop waits for data, whether a loop runs, expected
# verdicts); idle: no loop and no load, never judged busy (the GPU idle, or nothing to judge by)
PATTERNS: dict[str, tuple[float, bool, tuple[str, ...]]] = {
    "steady": (0.0, True, ("compute-bound",)),
    "pulsing": (0.5, True, ("input-bound: cpu", "input-bound: disk")),
    "idle": (0.0, False, ("idle", "unknown")),
    "several": (0.0, True, ("compute-bound",)),
}


def _until(phase: float) -> None:
    """Sleep to `phase` of the next wall-clock second: the stand-in's patterns use that clock."""
    time.sleep((phase - time.time() % 1.0) % 1.0 or 1.0)


def cuda_step() -> Callable[[float], None] | None:
    """A step that keeps GPU 0 busy for a given time; None without torch or CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    a = torch.randn(4096, 4096, device="cuda:0")

    def step(seconds: float) -> None:
        nonlocal a
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize()

    return step


def loop(wait: float, step: Callable[[float], None] | None, stop: threading.Event) -> None:
    import diskinfo.torch

    def batches() -> Iterator[int]:
        while not stop.is_set():
            if wait:
                _until(wait)
            yield 0

    for _ in diskinfo.torch.watch(batches()):
        if stop.is_set():
            break
        seconds = (1.0 - time.time() % 1.0) if wait else 0.2
        if step is not None:
            step(seconds)
        else:
            time.sleep(seconds)


def run_pattern(name: str, seconds: float, step: Callable[[float], None] | None) -> dict[str, Any]:
    wait, steps, expected = PATTERNS[name]
    # the loader state is cumulative per process: each pattern's collector takes its start
    loader, gpu = LoaderCollector(loader_state.state_dir()), GpuCollector()
    loader.start()
    gpu.start()
    stop = threading.Event()
    worker = threading.Thread(target=loop, args=(wait, step, stop), daemon=True)
    if steps:
        worker.start()
    records = []
    last = time.monotonic()
    end = last + seconds
    try:
        while time.monotonic() < end:
            time.sleep(INTERVAL_S)
            now = time.monotonic()
            record = IntervalRecord(ts=time.time(), elapsed_s=now - last)
            last = now
            record.procs = [ProcessIO(pid=os.getpid(), name="python", role="main")]
            loader.fill(record)
            gpu.fill(record)
            record.verdict = decide(record, {})
            records.append(record)
    finally:
        stop.set()
        if steps:
            worker.join(timeout=5)
        gpu.stop()
    judged = records[1:]  # the first interval holds the start
    verdicts = [r.verdict.verdict for r in judged if r.verdict is not None]
    top = max(set(verdicts), key=verdicts.count) if verdicts else "none"
    last_rec = judged[-1] if judged else records[-1]
    return {
        "pattern": name,
        "expected": list(expected),
        "verdict": str(top),
        "ok": top in expected,
        "verdicts": [str(v) for v in verdicts],
        "summary": last_rec.verdict.summary if last_rec.verdict else "",
        "fixes": last_rec.verdict.fixes if last_rec.verdict else [],
        "gpus": [vars(g) for g in last_rec.gpus or []],
        "warnings": [w for r in records for w in r.warnings],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", required=True, help="the JSON report to write")
    parser.add_argument("--patterns", default=",".join(PATTERNS))
    parser.add_argument("--seconds", type=float, default=12.0, help="per pattern")
    args = parser.parse_args(argv)
    # the wrapper's state files for this run only, removed at exit: after the wrapper's own
    # exit hook (registered later, so run first) has published its last figures there
    state = tempfile.mkdtemp(prefix="gpu-check-")
    atexit.register(shutil.rmtree, state, ignore_errors=True)
    os.environ[loader_state.STATE_DIR_ENV] = state
    nvml, reason = Nvml.open()
    if nvml is None:
        print(f"gpu-patterns: no GPU figures: {reason}", file=sys.stderr)
        return 2
    gpus = list(zip(nvml.names, nvml.uuids, strict=True))
    nvml.close()
    step = cuda_step()
    results = []
    for name in args.patterns.split(","):
        if name not in PATTERNS:
            print(f"gpu-patterns: unknown pattern {name!r} (of {', '.join(PATTERNS)})")
            return 2
        if name == "several" and len(gpus) < 2:
            results.append({"pattern": name, "ok": True, "verdict": "skipped: one GPU"})
            continue
        results.append(run_pattern(name, args.seconds, step))
    report = {
        "gpus": [{"name": n, "uuid": u} for n, u in gpus],
        "load": "torch matmuls on cuda:0" if step is not None else "none (sleeps: NVML stand-in)",
        "interval_s": INTERVAL_S,
        "results": results,
    }
    Path(args.report).write_text(json.dumps(report, indent=1, default=str) + "\n")
    print(f"{'pattern':<9} {'verdict':<28} {'expected':<40} GPUs judged")
    for r in results:
        judged = [g["index"] for g in r.get("gpus", []) if g.get("training")]
        print(
            f"{r['pattern']:<9} {r['verdict']:<28} {' or '.join(r.get('expected', [])):<40} "
            f"{judged}{'' if r['ok'] else '  <- not as expected'}"
        )
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
