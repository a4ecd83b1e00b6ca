"""The GPU path end to end on the NVML stand-in: `diskinfo watch` with nvidia-ml-py loading
tests/nvml-stand-in's library, a real training process wrapped with diskinfo.torch.watch, and
the JSONL records it writes. Each scenario is one a real node has: a busy GPU, a GPU pulsing
while the loop waits (at both ends of NVML's sample period), eight GPUs with training on one,
a MIG-enabled GPU, a GPU lost mid-run, a driver/library mismatch."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.nvml_stand_in import TRAIN, environment, library

pytestmark = pytest.mark.system

RUN_S = 10.0
INTERVAL_S = 2  # two pulses of a 1 s cycle per interval: pulsing needs busy and idle twice
H100 = 'name="NVIDIA H100 80GB HBM3" mem_total_mb=81559'


@pytest.fixture(scope="module")
def lib() -> Path:
    return library()


def run(tmp_path: Path, scenario: str, wait: float, exit_code: int = 0) -> dict:
    """`diskinfo watch` at INTERVAL_S while TRAIN runs; the records it wrote."""
    (tmp_path / "scenario").write_text(scenario)
    logs, pid_file = tmp_path / "logs", tmp_path / "train.pid"
    env = {
        **os.environ,
        **environment(tmp_path / "scenario"),
        "DISKINFO_STATE_DIR": str(tmp_path / "state"),
        "DISKINFO_BASELINE": str(tmp_path / "baseline.json"),
    }
    watch = [sys.executable, "-m", "diskinfo.cli", "watch", str(tmp_path)]
    watch += ["--interval", str(INTERVAL_S)]
    monitor = subprocess.Popen(
        [*watch, "--log-dir", str(logs), "--pid-file", str(pid_file)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        train = subprocess.run(
            [sys.executable, "-c", TRAIN, str(pid_file), str(wait), str(RUN_S), str(exit_code)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        monitor.send_signal(signal.SIGTERM)
        _, err = monitor.communicate(timeout=30)
    assert monitor.returncode == 0, err
    records = [json.loads(line) for line in (logs / "diskinfo.jsonl").read_text().splitlines()]
    trained = [r for r in records if r["loader"] and r["loader"]["batches"] > 0]
    assert len(trained) >= 3, (train.stderr, records)
    steady = trained[1:]  # the first interval holds the start
    return {
        "records": records,
        "steady": steady,
        "verdicts": collections.Counter(r["verdict"]["verdict"] for r in steady),
        "warnings": [w for r in records for w in r["warnings"]],
        "train": train,
        "log": (logs / "diskinfo.log").read_text(),
    }


def most(result: dict) -> str:
    return result["verdicts"].most_common(1)[0][0]


def test_one_busy_gpu_is_compute_bound(lib, tmp_path):
    r = run(tmp_path, f"gpu {H100} pattern=100:1 processes=trainer\n", wait=0.0)
    assert most(r) == "compute-bound", r["verdicts"]
    gpu = r["steady"][-1]["gpus"][0]
    assert gpu["training"] is True and gpu["training_by"] == "nvml-pids"
    assert gpu["util_mean"] > 95 and gpu["name"] == "NVIDIA H100 80GB HBM3"


@pytest.mark.parametrize("period_ms", [1000 / 6, 1000])
def test_a_gpu_pulsing_while_the_loop_waits_is_input_bound(lib, tmp_path, period_ms):
    """Half of each second waiting for data: input-bound whatever NVML's sample period. At
    1/6 s the GPU figures show the pulses; at 1 s each sample averages a whole pulse (50%)."""
    scenario = f"gpu {H100} pattern=0:0.5,100:0.5 period_ms={period_ms} processes=trainer\n"
    r = run(tmp_path, scenario, wait=0.5)
    assert most(r).startswith("input-bound"), r["verdicts"]
    # the cause follows this shared machine's load (its disk, its CPU); where it is the loop's
    # CPU side, the fixes know a GPU is in use
    cpu_side = [rec for rec in r["steady"] if rec["verdict"]["verdict"] == "input-bound: cpu"]
    for rec in cpu_side:
        fixes = rec["verdict"]["fixes"]
        assert any("pin_memory=True" in f or "on the GPU" in f for f in fixes), fixes
    last = r["steady"][-1]
    gpu = last["gpus"][0]
    if period_ms < 500:
        assert gpu["pulsing"] > 0.5 and gpu["idle_fraction"] > 0.3, gpu
        assert 9 <= gpu["samples"] <= 15, gpu  # the driver's 6 samples a second, each once
    else:
        assert 35 <= gpu["util_mean"] <= 65 and gpu["pulsing"] == 0, gpu
        assert gpu["samples"] <= 3, gpu


def test_eight_gpus_with_training_on_one_judge_that_one(lib, tmp_path):
    gpus = [f"gpu {H100} pattern=0:1" for _ in range(8)]
    gpus[3] = f"gpu {H100} pattern=100:1 mem_used_mb=40000 processes=trainer"
    r = run(tmp_path, "\n".join(gpus) + "\n", wait=0.0)
    assert most(r) == "compute-bound", r["verdicts"]
    last = r["steady"][-1]
    assert [g["training"] for g in last["gpus"]] == [i == 3 for i in range(8)]
    assert "idle" not in last["verdict"]["summary"]
    assert r["log"].count("(unused by the training)") >= 7


def test_a_mig_gpu_says_so_once_and_the_loop_decides(lib, tmp_path):
    scenario = f"gpu {H100} util_error=3 mem_used_mb=20000 processes=trainer\n"
    r = run(tmp_path, scenario, wait=0.5)
    said = [w for w in r["warnings"] if "utilisation not supported" in w]
    assert len(said) == 1 and "MIG" in said[0], r["warnings"]
    assert sum(w.startswith("gpu:") for w in r["warnings"]) == 1, r["warnings"]  # no flood
    assert most(r).startswith("input-bound"), r["verdicts"]
    assert r["steady"][-1]["gpus"][0]["state"] == "no-utilisation"


def test_a_lost_gpu_is_said_once_and_everything_goes_on(lib, tmp_path):
    scenario = f"gpu {H100} pattern=100:1 processes=trainer lost_after_s=3\n"
    r = run(tmp_path, scenario, wait=0.0, exit_code=3)
    said = [w for w in r["warnings"] if "is lost" in w]
    assert len(said) == 1 and "GPU is lost" in said[0], r["warnings"]
    assert r["train"].returncode == 3  # the training's own exit status, untouched
    after = [rec for rec in r["records"] if rec["gpus"] and rec["gpus"][0]["state"] == "lost"]
    assert len(after) >= 3  # the monitor went on recording
    assert all(rec["verdict"]["verdict"] != "idle" for rec in after if rec["loader"])


def test_a_driver_library_mismatch_is_one_line_and_no_gpu_figures(lib, tmp_path):
    r = run(tmp_path, f"init_error 18\ngpu {H100}\n", wait=0.5)
    assert all(rec["gpus"] is None for rec in r["records"])
    said = [w for w in r["warnings"] if "gpu:" in w]
    assert len(said) == 1 and "does not match the loaded driver" in said[0], said
    assert most(r).startswith("input-bound"), r["verdicts"]
