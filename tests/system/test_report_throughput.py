"""`diskinfo report A B` states the throughput the training script itself measured.

Two runs of a real DataLoader (2 worker processes, a fixed sleep per step standing in for the
model) under the real monitor at a 1 s interval, each as a user runs it: the script sets up
before its loop and saves a checkpoint after it, so its process lives (and publishes) for
seconds in which it trains nothing. The script counts its own samples and batches and times its
loop; the report's samples/s, batches/s and the A-vs-B ratio must equal those figures. Before
the fix the report divided by every interval a loader file existed in, and said x1.25 where
the script measured x1.14.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.system, pytest.mark.slow]

TRAIN = r"""
import json, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
import diskinfo.torch

step_s, samples_n, batch = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(1)


class Numbers(Dataset):
    def __len__(self):
        return samples_n

    def __getitem__(self, i):
        return torch.full((3, 8, 8), float(i)), i


loader = DataLoader(Numbers(), batch_size=batch, num_workers=2)  # the last batch is partial
time.sleep(1.5)  # building the model
samples = batches = 0
start = time.perf_counter()
for x, y in diskinfo.torch.watch(loader):
    samples += len(y)
    batches += 1
    time.sleep(step_s)  # the step
seconds = time.perf_counter() - start
time.sleep(2.5)  # saving a checkpoint: alive, not training
print(json.dumps({"samples": samples, "batches": batches, "seconds": seconds}))
"""


def _diskinfo(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def train_under_monitor(base: Path, name: str, step_s: float) -> tuple[Path, dict]:
    """The training script under `diskinfo watch --interval 1`; the JSONL and what the script
    measured itself."""
    env = {**os.environ, "DISKINFO_STATE_DIR": str(base / name / "state")}
    logs = base / name / "logs"
    watch = ["watch", str(base), "--interval", "1", "--log-dir", str(logs)]
    monitor = subprocess.Popen(
        [sys.executable, "-m", "diskinfo.cli", *watch],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        train = subprocess.run(
            [sys.executable, "-c", TRAIN, str(step_s), "1000", "16"],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert train.returncode == 0, train.stderr
        subprocess.run(["sleep", "1.5"], check=True)  # the monitor reads the last publish
    finally:
        monitor.send_signal(signal.SIGTERM)
        _, err = monitor.communicate(timeout=30)
    assert monitor.returncode == 0, err
    return logs / "diskinfo.jsonl", json.loads(train.stdout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("throughput")
    return [train_under_monitor(base, "a", 0.060), train_under_monitor(base, "b", 0.045)]


def test_report_states_what_the_loop_measured(runs):
    (a, own_a), (b, own_b) = runs
    assert own_a["samples"] == own_b["samples"] == 1000 and own_a["batches"] == 63
    out = _diskinfo("report", str(a), str(b), "--json", "--no-png")
    assert out.returncode == 0, out.stderr
    summaries = json.loads(out.stdout)["runs"]
    for s, own in zip(summaries, (own_a, own_b), strict=True):
        print(s["name"], s["batches_s"], s["samples_s"], s["loop_s"], own)
        assert s["batches_s"] == pytest.approx(own["batches"] / own["seconds"], rel=0.01)
        assert s["samples_s"] == pytest.approx(own["samples"] / own["seconds"], rel=0.01)
        assert s["loop_s"] == pytest.approx(own["seconds"], rel=0.01)
        # the run lasted well beyond the loop: the old rate (batches over every interval with a
        # loader file) is off by far more than the tolerance
        records = [json.loads(line) for line in Path(s["name"]).read_text().splitlines()]
        with_loader = [r for r in records if r["loader"] is not None]
        old = sum(r["loader"]["batches"] for r in with_loader) / sum(
            r["elapsed_s"] for r in with_loader
        )
        assert old < 0.85 * s["batches_s"]

    ratio = (own_b["samples"] / own_b["seconds"]) / (own_a["samples"] / own_a["seconds"])
    text = _diskinfo("report", str(a), str(b), "--no-png")
    assert text.returncode == 0, text.stderr
    lines = {line.split("  ")[0]: line for line in text.stdout.splitlines()}
    shown = [float(w[1:]) for w in lines["samples/s"].split() if w.startswith("x")]
    assert shown and shown[0] == pytest.approx(ratio, abs=0.011), (lines["samples/s"], ratio)
    shown = [float(w[1:]) for w in lines["batches/s"].split() if w.startswith("x")]
    assert shown and shown[0] == pytest.approx(ratio, abs=0.011), (lines["batches/s"], ratio)
