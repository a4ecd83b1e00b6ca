"""The image on GPUs it has never met, as far as a machine without one allows: whole containers
with the NVML stand-in library mounted where nvidia-ml-py finds it (docs/gpu.md), the README's
way of running a training command, and what the user sees: docker logs, the exit status and
logs/diskinfo.jsonl. Inside a container NVML's PIDs are the host's, so the monitor finds the
training's GPU by the processes and memory on it, as it would on a real node."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from tests.helpers.nvml_stand_in import TRAIN, library

pytestmark = pytest.mark.image

H100 = 'name="NVIDIA H100 80GB HBM3" mem_total_mb=81559'
RUN_S = 12


def train_in_container(container, tmp_path: Path, scenario: str, wait: float, code: int = 0):
    lib_dir, inputs, logs = library().parent, tmp_path / "in", tmp_path / "logs"
    inputs.mkdir()
    logs.mkdir()
    (inputs / "scenario").write_text(scenario)
    (inputs / "train.py").write_text(TRAIN)
    running = container(
        "python3",
        "/opt/gpu-test/train.py",
        "/tmp/train.pid",
        str(wait),
        str(RUN_S),
        str(code),
        env={
            "LD_LIBRARY_PATH": "/opt/nvml-stand-in",
            "NVML_STAND_IN_SCENARIO": "/opt/gpu-test/scenario",
            "DISKINFO_INTERVAL": "2",
        },
        volumes={
            str(lib_dir): {"bind": "/opt/nvml-stand-in", "mode": "ro"},
            str(inputs): {"bind": "/opt/gpu-test", "mode": "ro"},
            str(logs): {"bind": "/workspace/logs"},
        },
    )
    status = running.wait(timeout=120)
    docker_logs = running.logs()
    records = [json.loads(x) for x in (logs / "diskinfo.jsonl").read_text().splitlines()]
    # whole intervals of the loop: not its first, nor the shorter one the monitor writes at
    # its stop to carry how the command ended (command_end)
    trained = [
        r
        for r in records
        if r["loader"] and r["loader"]["batches"] > 0 and not r.get("command_end")
    ][1:]
    assert len(trained) >= 3, docker_logs[-3000:]
    return {
        "status": status,
        "docker_logs": docker_logs,
        "records": records,
        "steady": trained,
        "verdict": collections.Counter(r["verdict"]["verdict"] for r in trained).most_common(1)[0][
            0
        ],
        "warnings": [w for r in records for w in r["warnings"]],
    }


def test_one_busy_gpu_is_compute_bound_and_the_banner_lists_it(container, tmp_path):
    scenario = f"driver 550.54.15\ngpu {H100} pattern=100:1 processes=trainer\n"
    r = train_in_container(container, tmp_path, scenario, wait=0.0)
    assert r["status"] == 0 and r["verdict"] == "compute-bound", r["docker_logs"][-3000:]
    banner = r["docker_logs"]
    assert "NVIDIA H100 80GB HBM3" in banner and "550.54.15" in banner, banner[:3000]
    gpu = r["steady"][-1]["gpus"][0]
    # in the container NVML's PIDs are not compared; the processes on the GPU say it
    assert gpu["training"] is True and gpu["training_by"] == "memory"


def test_a_pulsing_gpu_while_the_loop_waits_is_input_bound_with_a_gpu_fix(container, tmp_path):
    scenario = f"gpu {H100} pattern=0:0.5,100:0.5 period_ms=166.667 processes=trainer\n"
    r = train_in_container(container, tmp_path, scenario, wait=0.5)
    assert r["verdict"].startswith("input-bound"), r["docker_logs"][-3000:]
    last = r["steady"][-1]
    assert last["gpus"][0]["pulsing"] > 0.5
    assert any("pin_memory=True" in f or "on the GPU" in f for f in last["verdict"]["fixes"])


def test_eight_gpus_with_training_on_one_get_the_one_gpu_verdict(container, tmp_path):
    gpus = [f"gpu {H100} pattern=0:1" for _ in range(8)]
    gpus[0] = f"gpu {H100} pattern=100:1 mem_used_mb=40000 processes=trainer"
    r = train_in_container(container, tmp_path, "\n".join(gpus) + "\n", wait=0.0)
    assert r["verdict"] == "compute-bound", r["docker_logs"][-3000:]
    last = r["steady"][-1]
    assert [g["training"] for g in last["gpus"]] == [True] + [False] * 7
    assert "idle" not in last["verdict"]["summary"]


def test_a_mig_gpu_is_one_line_and_the_loop_decides(container, tmp_path):
    scenario = f"gpu {H100} util_error=3 mem_used_mb=20000 processes=trainer\n"
    r = train_in_container(container, tmp_path, scenario, wait=0.5)
    said = [w for w in r["warnings"] if "gpu:" in w]
    assert len(said) == 1 and "MIG" in said[0], r["warnings"]
    assert r["verdict"].startswith("input-bound")


def test_a_lost_gpu_is_one_line_and_the_training_exit_code_stands(container, tmp_path):
    scenario = f"gpu {H100} pattern=100:1 processes=trainer lost_after_s=4\n"
    r = train_in_container(container, tmp_path, scenario, wait=0.0, code=3)
    assert r["status"] == 3, r["docker_logs"][-3000:]
    said = [w for w in r["warnings"] if "gpu:" in w]
    assert len(said) == 1 and "is lost" in said[0], r["warnings"]
    assert sum(1 for rec in r["records"] if rec["gpus"] and rec["gpus"][0]["state"] == "lost") >= 2


def test_a_driver_library_mismatch_is_one_line_and_everything_else_runs(container, tmp_path):
    r = train_in_container(container, tmp_path, f"init_error 18\ngpu {H100}\n", wait=0.5)
    assert r["status"] == 0
    assert all(rec["gpus"] is None for rec in r["records"])
    said = [w for w in r["warnings"] if "gpu:" in w]
    assert len(said) == 1 and "does not match the loaded driver" in said[0], said
    assert r["verdict"].startswith("input-bound")
