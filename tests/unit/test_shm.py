"""/dev/shm against SHM_MIN_MB, one rule everywhere: the start-up step (05-shm.sh, run here in
bash), the banner (test_details_banner_render.py) and the verdict all take the size from
diskinfo.sources.shm and the floor from diskinfo.thresholds; SHM_MIN_MB=0 never warns."""

from __future__ import annotations

import subprocess
import sys

import pytest

from diskinfo import thresholds as t
from diskinfo.sources import shm
from tests.helpers import ROOT

STEP = ROOT / "docker/start/init.d/05-shm.sh"


def test_size_is_measured_or_none():
    assert (shm.size_mb() or 0) > 0
    assert shm.size_mb("/does/not/exist") is None


@pytest.mark.parametrize(("floor", "small"), [("0", False), ("", False), ("99999999", True)])
def test_the_floor_rule(floor, small):
    env = {"SHM_MIN_MB": floor} if floor else {}
    size = 2048.0 if floor == "" else shm.size_mb() or 0
    assert t.shm_small(size, env) is small
    assert t.shm_min_mb({"SHM_MIN_MB": "nonsense"}) == t.SHM_MIN_MB_DEFAULT
    assert t.shm_min_mb({"SHM_MIN_MB": "-1"}) == t.SHM_MIN_MB_DEFAULT


def _startup_step(tmp_path, floor: str) -> str:
    """05-shm.sh sourced as entrypoint.sh sources it. Its `python3 -I` is this checkout's
    interpreter without -I, so that PYTHONPATH gives it this checkout's diskinfo (the image
    test test_details_shm.py runs the real one)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    python3 = bin_dir / "python3"
    python3.write_text(f'#!/bin/sh\n[ "$1" = -I ] && shift\nexec {sys.executable} "$@"\n')
    python3.chmod(0o755)
    script = (
        f'set -euo pipefail\nstartup_log() {{ echo "$*"; }}\n. "{STEP}"\necho "size=$SHM_SIZE_MB"'
    )
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": str(ROOT / "src"),
        "STARTUP_STATE_DIR": str(tmp_path),
        "SHM_MIN_MB": floor,
    }
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_startup_step_warns_under_the_floor_and_never_at_zero(tmp_path):
    size = int(shm.size_mb() or 0)
    small = _startup_step(tmp_path, str(size + 1))
    assert f"WARNING /dev/shm is only {size} MB" in small and "--shm-size=16g" in small
    assert (tmp_path / "shm_mb").read_text() == f"{size}\n"
    off = _startup_step(tmp_path, "0")
    assert "WARNING" not in off and f"size={size}" in off
