#!/usr/bin/env python3
"""`docker run --rm IMAGE demo`: diskinfo's verdicts on a real training loop, no GPU, no data.

It writes a small dataset of files, trains a small model on it twice, each phase long enough for
the image's monitor to judge a few intervals, and after each phase prints what the monitor
said about it (read from its JSONL):
1. a slow input pipeline: every sample decoded in the training process (num_workers=0), so the
   loop waits for data a good part of each step: input-bound;
2. the fix the monitor advised for phase 1, applied (more DataLoader workers, or the samples
   decoded once and kept in RAM), and its effect: batches/s and data-wait before and after.
Runs as the container's training command, so the monitor follows its process tree. Outside the
image it still trains, and says that no monitor recorded it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SAMPLE_BYTES = 3 * 32 * 32 * 4  # one float32 3x32x32 "image" per file
CLASSES = 10


@dataclass
class Phase:
    title: str
    start: float = 0.0
    end: float = 0.0
    reported: bool = False
    fix: str = ""  # the monitor's first fix for this phase
    rate: float = 0.0  # batches/s


def say(msg: str) -> None:
    print(f"demo: {msg}", flush=True)


def make_dataset(root: Path, samples: int) -> None:
    """`samples` small files in CLASSES folders, like an ImageFolder tree of tiny images."""
    import numpy as np

    rng = np.random.default_rng(0)
    for index in range(samples):
        folder = root / f"class{index % CLASSES}"
        folder.mkdir(parents=True, exist_ok=True)
        data = rng.standard_normal(SAMPLE_BYTES // 4).astype("float32").tobytes()
        (folder / f"{index:05d}.bin").write_bytes(data)


class FileDataset:
    """Reads and 'decodes' one file per sample; decoding costs `decode_ms` of CPU, as JPEG does."""

    def __init__(self, root: Path, decode_ms: float) -> None:
        self.files = sorted(root.glob("class*/*.bin"))
        self.decode_ms = decode_ms

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int):
        import torch

        path = self.files[index]
        x = torch.frombuffer(bytearray(path.read_bytes()), dtype=torch.float32).view(3, 32, 32)
        deadline = time.perf_counter() + self.decode_ms / 1000
        while time.perf_counter() < deadline:  # the decoder's work: a busy CPU, like Pillow
            x = (x * 0.999).clamp(-4, 4)
        return x, int(path.parent.name.removeprefix("class"))


def model_and_optimiser():
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(4),
        nn.Flatten(),
        nn.Linear(32 * 16, CLASSES),
    )
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def busy(ms: float) -> None:
    """`ms` of CPU work, as a decoder or a larger model's step spends it."""
    deadline = time.perf_counter() + ms / 1000
    x = 1.0
    while time.perf_counter() < deadline:
        x = x * 0.999 + 0.001


def train(
    loader, seconds: float, tick: Callable[[], None], step_ms: float = 0.0
) -> tuple[int, float]:
    """Epochs over `loader` for `seconds`; returns (batches, loss). `tick` about once a second;
    each step costs `step_ms` of CPU more (a model larger than this small one)."""
    from torch import nn

    model, optimiser = model_and_optimiser()
    loss_fn = nn.CrossEntropyLoss()
    batches, loss, last_tick = 0, 0.0, time.monotonic()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for x, y in loader:
            optimiser.zero_grad()
            out = loss_fn(model(x), y)
            out.backward()
            optimiser.step()
            busy(step_ms)
            batches, loss = batches + 1, out.item()
            if time.monotonic() - last_tick >= 1:
                tick()
                last_tick = time.monotonic()
            if time.monotonic() >= end:
                break
    return batches, loss


def records(jsonl: Path, since: float, until: float) -> list[dict]:
    """The monitor's records whose whole interval lies in [since, until]."""
    try:
        lines = jsonl.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a line still being written
        ts, elapsed = rec.get("ts", 0), rec.get("elapsed_s", 0)
        if ts - elapsed >= since and ts <= until + 0.5:
            out.append(rec)
    return out


def verdict_line(recs: list[dict], name: str) -> str:
    """The monitor's verdict `name` in its own words, with its first fix and the data-wait."""
    verdicts = [r["verdict"] for r in recs if r.get("verdict")]
    last = [v for v in verdicts if v["verdict"] == name][-1]
    fix = f" | try: {last['fixes'][0]}" if last.get("fixes") else ""
    share = [r["loader"]["wait_share"] for r in recs if r.get("loader")]
    wait = f"; data-wait {100 * sum(share) / len(share):.0f}% of step time" if share else ""
    count = sum(v["verdict"] == name for v in verdicts)
    return (
        f"[Verdict] {name}: {last.get('summary', '')}{fix}"
        f"  ({count} of {len(verdicts)} intervals{wait})"
    )


def settled(recs: list[dict]) -> str | None:
    """A verdict the monitor gave twice in a row within the phase, else None."""
    names = [r["verdict"]["verdict"] for r in recs if r.get("verdict")]
    if len(names) >= 2 and names[-1] == names[-2] and names[-1] != "unknown":
        return names[-1]
    return None


def report(phase: Phase, jsonl: Path, wait_s: float) -> bool:
    """Print the monitor's verdict on `phase` once it has settled, or once the phase is over
    and its last interval recorded (or wait_s has passed): the verdict that held most."""
    if phase.reported or not phase.start:
        return phase.reported
    until = phase.end or time.time()
    since_start = records(jsonl, phase.start, 1e18)  # one read of the file per call
    recs = [r for r in since_start if r.get("ts", 0) <= until + 0.5]
    name = settled(recs)
    if name is None and phase.end:
        recorded = any(r.get("ts", 0) >= phase.end - 0.5 for r in since_start)
        if not recorded and time.time() < phase.end + wait_s:
            return False
        names = [r["verdict"]["verdict"] for r in recs if r.get("verdict")]
        name = Counter(names).most_common(1)[0][0] if names else None
        if name is None:
            phase.reported = True
            say(
                f"  no monitor verdict for '{phase.title}' in {jsonl}: is the monitor running"
                " (docker logs, supervisord.log)? Outside the image run `diskinfo watch` beside it."
            )
            return True
    if name is None:
        return False
    phase.reported = True
    verdicts = [r["verdict"] for r in recs if r.get("verdict", {}).get("verdict") == name]
    phase.fix = (verdicts[-1].get("fixes") or [""])[0] if verdicts else ""
    say(f"  the monitor on '{phase.title}': {verdict_line(recs, name)}")
    return True


WORKERS_FIX = re.compile(r"num_workers (?:\d+|\?) -> (\d+)")


def apply_fix(fix: str, root: Path, decode_ms: float) -> tuple[str, object, dict]:
    """(what was done, dataset, DataLoader options) for the monitor's fix: more workers, or
    the samples decoded once into RAM (preloading; also what the demo does for a fix it cannot
    apply by itself, such as CPU pinning, and says so)."""
    import torch
    from torch.utils.data import TensorDataset

    workers = WORKERS_FIX.match(fix)
    if workers:
        n = int(workers.group(1))
        return (
            f"num_workers={n}, as the monitor advised",
            FileDataset(root, decode_ms),
            {
                "num_workers": n,
                "persistent_workers": True,
            },
        )
    fast = FileDataset(root, decode_ms=0)
    xs, ys = zip(*(fast[i] for i in range(len(fast))), strict=True)
    preloaded = TensorDataset(torch.stack(xs), torch.tensor(ys))
    if "preload" in fix:
        return "samples decoded once and kept in RAM, as the monitor advised", preloaded, {}
    advised = fix[:80].replace("'", "")  # the phase's title is printed in quotes
    said = f" (the monitor advised: {advised}...: yours to apply)" if fix else ""
    return f"samples decoded once and kept in RAM{said}", preloaded, {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per phase (default 20)")
    parser.add_argument("--samples", type=int, default=1000, help="files in the dataset")
    parser.add_argument("--decode-ms", type=float, default=1.0, help="CPU cost per sample")
    parser.add_argument("--step-ms", type=float, default=30.0, help="CPU cost per step")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.samples < 64 or args.decode_ms < 0 or args.step_ms < 0:
        print(
            "demo: --seconds > 0, --samples >= 64, --decode-ms and --step-ms >= 0, please",
            file=sys.stderr,
        )
        return 2

    import torch
    from torch.utils.data import DataLoader

    import diskinfo.torch
    from diskinfo import logfiles

    torch.set_num_threads(1)  # leave the other cores to the monitor and the services
    log_dir = Path(os.environ.get("LOG_DIR", logfiles.LOG_DIR))
    jsonl = log_dir / logfiles.JSONL
    interval = float(os.environ.get("DISKINFO_INTERVAL", "5"))
    root = Path(tempfile.mkdtemp(prefix="diskinfo-demo-"))
    try:
        make_dataset(root, args.samples)
        size_mb = args.samples * SAMPLE_BYTES / 2**20
        say(f"{args.samples} samples ({size_mb:.0f} MB) written to {root}")
        phases = [
            Phase("a slow input pipeline: each sample decoded in the training loop, num_workers=0"),
            Phase("the fix"),
        ]

        def tick() -> None:
            for phase in phases:
                report(phase, jsonl, interval + 3)

        for number, phase in enumerate(phases, 1):
            options: dict = {}
            if number == 1:
                dataset: object = FileDataset(root, args.decode_ms)
            else:  # what the monitor advised for phase 1, once it has said it
                while not report(phases[0], jsonl, interval + 3):
                    time.sleep(0.5)
                done, dataset, options = apply_fix(phases[0].fix, root, args.decode_ms)
                phase.title = f"the fix: {done}"
            say(f"phase {number} of {len(phases)}: {phase.title} ({args.seconds:g} s)")
            loader = diskinfo.torch.watch(
                DataLoader(dataset, batch_size=32, shuffle=True, **options)  # type: ignore[arg-type]
            )
            phase.start = time.time()
            batches, loss = train(loader, args.seconds, tick, args.step_ms)
            phase.end = time.time()
            phase.rate = batches / (phase.end - phase.start)
            say(f"  {batches} batches, {phase.rate:.1f} batches/s, loss {loss:.3f}")
        for phase in phases:
            while not report(phase, jsonl, interval + 3):
                time.sleep(0.5)
        before, after = phases[0].rate, phases[1].rate
        if before > 0:
            say(f"the fix's effect: {before:.1f} -> {after:.1f} batches/s (x{after / before:.2f})")
        say(
            f"done. Every figure: {log_dir / logfiles.TEXT_LOG}; a report with a timeline:"
            f" diskinfo report {jsonl}"
        )
        return 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
