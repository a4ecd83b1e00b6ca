"""validate-cuda on this machine's real CPU torch: CPU-side checks, failures, the no-GPU line."""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.validate_cuda import checks, common, judge, machine, measure, report
from tests.helpers import ROOT

SCRIPT = ROOT / "scripts" / "validate-cuda"

torch = pytest.importorskip("torch")
NO_GPU = shutil.which("nvidia-smi") is None and not torch.cuda.is_available()


def run(*args: str, script: Path = SCRIPT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=300
    )


def rows(stdout: str) -> dict[str, str]:
    """CHECK -> STATUS from the table."""
    found = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1] in ("PASS", "FAIL", "SKIP"):
            found[parts[0]] = parts[1]
    return found


def test_cpu_only_passes_end_to_end_as_installed(tmp_path: Path) -> None:
    # installed in the image as a /usr/local/bin/validate-cuda link to the launcher beside the
    # package: no .py, the package found through the link, and spawn must still work
    installed = tmp_path / "validate-cuda"
    installed.symlink_to(SCRIPT)
    report_path = tmp_path / "logs" / "report.json"
    proc = run("--cpu-only", "--report", str(report_path), script=installed)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert rows(proc.stdout) == {name: "PASS" for name in common.CPU_CHECKS}
    assert "Traceback" not in proc.stderr
    data = json.loads(report_path.read_text())
    assert data["passed"] is True and data["mode"] == "cpu-only"
    assert [c["name"] for c in data["checks"]] == list(common.CPU_CHECKS)
    gloo = next(c for c in data["checks"] if c["name"] == "gloo_allreduce")
    assert gloo["data"]["per_rank"] == {"0": [3.0, 3.0], "1": [3.0, 3.0]}
    assert data["environment"]["torch"] == torch.__version__


def test_failed_allreduce_fails_the_run(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    proc = run("--cpu-only", "--inject-fault", "allreduce", "--report", str(report_path))
    assert proc.returncode == 1
    assert rows(proc.stdout)["gloo_allreduce"] == "FAIL"
    assert rows(proc.stdout)["conv2d_cpu"] == "PASS"
    assert "gave the wrong sum" in proc.stdout and "expected 3" in proc.stdout
    assert json.loads(report_path.read_text())["passed"] is False


def test_conv_mismatch_fails_and_unwritable_report_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    proc = run("--cpu-only", "--inject-fault", "conv", "--report", str(blocker / "r.json"))
    assert proc.returncode == 1
    assert rows(proc.stdout)["conv2d_cpu"] == "FAIL"
    assert "disagrees with the float64 CPU reference" in proc.stdout
    notes = [line for line in proc.stdout.splitlines() if "report not written" in line]
    assert len(notes) == 1 and str(blocker) in notes[0]


@pytest.mark.skipif(not NO_GPU, reason="this machine has an NVIDIA GPU")
def test_no_gpu_is_one_line_and_non_zero() -> None:
    proc = run()
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == common.EXIT_NO_GPU
    assert len(lines) == 1 and "no NVIDIA GPU" in lines[0] and "--cpu-only" in lines[0]


@pytest.mark.parametrize(
    "args", [["--bogus"], ["--expect-cuda", "eleven"], ["--memory-fraction", "0"]]
)
def test_bad_option_is_one_line(args: list[str]) -> None:
    proc = run(*args)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode == common.EXIT_USAGE
    assert len(lines) == 1 and lines[0].startswith("validate-cuda: error:")


def test_a_rank_that_cannot_start_fails_the_allreduce() -> None:
    # NCCL ranks on a CPU build of torch: the worker raises, its error becomes the detail
    per_rank, error = measure.run_allreduce("nccl", 1, timeout_s=60)
    result = judge.judge_allreduce("nccl_allreduce", "nccl", 1, per_rank, error, None)
    assert result.status == common.FAIL and per_rank == {}
    assert "failed:" in result.detail and "\n" not in result.detail


def test_gpu_mode_with_a_driver_but_no_cuda_skips_with_reasons() -> None:
    # a host whose driver is fine but whose torch has no CUDA: every GPU check says why it skipped
    torch_check = machine.import_torch()[1]
    args = argparse.Namespace(inject_fault=None, timeout=60, matmul_size=256, memory_fraction=0.9)
    out = io.StringIO()
    results = checks.gpu_checks(
        torch,
        torch_check,
        # new enough for the CUDA of every torch the tests run (the pinned line is built for 12.6)
        common.DriverInfo("580.65.06", "NVML"),
        args,
        ("11.8", "default"),
        report.Table(common.GPU_CHECKS, out),
    )
    status = {r.name: r.status for r in results}
    assert status["driver"] == common.PASS
    assert status["cuda_available"] == status["cuda_version"] == common.FAIL
    assert {status[n] for n in common.GPU_CHECKS if n.startswith(("matmul", "h2d"))} == {
        common.SKIP
    }
    assert [r.name for r in results] == list(common.GPU_CHECKS)


def make_test_cuda(path: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path, "HOME": str(ROOT)}
    return subprocess.run(
        ["make", "-s", "test-cuda", "DOCKER=/usr/bin/docker"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(not NO_GPU or shutil.which("make") is None, reason="needs make, no GPU")
def test_make_test_cuda_skips_with_a_reason_and_succeeds(tmp_path: Path) -> None:
    proc = make_test_cuda(os.environ["PATH"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "test-cuda: skipped: no NVIDIA GPU on this host (nvidia-smi missing or lists no GPU)"
    )
    # a GPU host whose Docker lacks the NVIDIA runtime: a stand-in nvidia-smi lists one GPU
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-0)'\n")
    fake.chmod(0o755)
    proc = make_test_cuda(f"{tmp_path}:{os.environ['PATH']}")
    assert proc.returncode == 0, proc.stderr
    assert "skipped: GPU present but Docker has no NVIDIA runtime" in proc.stdout
