"""scripts/gpu-check.sh on the NVML stand-in: the script a lent GPU machine runs, smoke-tested
here where there is none. Each pattern gets the stand-in scenario a real load would produce;
the script's loop sleeps instead of running CUDA (docs/gpu.md says what that cannot show)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.nvml_stand_in import ROOT, environment, library

pytestmark = pytest.mark.system

H100 = 'gpu name="NVIDIA H100 80GB HBM3"'
SCENARIOS = {
    "steady": f"{H100} pattern=100:1 mem_used_mb=30000 processes=self\n",
    "pulsing": f"{H100} pattern=0:0.5,100:0.5 mem_used_mb=30000 processes=self\n",
    "idle": f"{H100} pattern=0:1\n",
    "several": f"{H100} pattern=100:1 processes=self\n" + f"{H100} pattern=0:1\n" * 3,
}


@pytest.mark.parametrize("pattern", SCENARIOS)
def test_gpu_check_runs_each_pattern_and_writes_its_report(tmp_path: Path, pattern: str):
    library()
    (tmp_path / "scenario").write_text(SCENARIOS[pattern])
    env = {
        **os.environ,
        **environment(tmp_path / "scenario"),
        "PYTHON": sys.executable,
        "VALIDATE_CUDA": "0",
        "GPU_CHECK_PATTERNS": pattern,
        "GPU_CHECK_SECONDS": "7",
    }
    out = tmp_path / "validation"
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check.sh"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (report,) = out.glob("*-patterns.json")
    result = json.loads(report.read_text())["results"][0]
    assert result["ok"], result
    judged = [g["index"] for g in result["gpus"] if g["training"]]
    assert judged == ([] if pattern == "idle" else [0]), result["gpus"]
    assert (out / report.name.replace(".json", ".txt")).read_text().startswith("pattern")


def test_gpu_check_imports_nothing_from_the_callers_folder(tmp_path: Path):
    """Run as root from a folder others write, its `python3 -c` probe imported their torch.py."""
    marker = tmp_path / "ran"
    (tmp_path / "torch.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    env = {**os.environ, "PYTHON": sys.executable, "VALIDATE_CUDA": "0",
           "GPU_CHECK_PATTERNS": "none", "GPU_CHECK_SECONDS": "1"}  # fmt: skip
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check.sh"), str(tmp_path / "out")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert not marker.exists()
