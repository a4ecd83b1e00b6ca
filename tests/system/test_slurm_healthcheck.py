"""monitoring/slurm/healthcheck.py where no Slurm is needed: bad settings are one line and exit
2; a monitor that cannot be read leaves the node alone (scontrol is never called)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.net import free_port

HEALTHCHECK = ROOT / "monitoring/slurm/healthcheck.py"

pytestmark = pytest.mark.system


def healthcheck(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    calls = tmp_path / "scontrol-calls"
    scontrol = tmp_path / "scontrol"  # records that it was called: it must not be
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 1\n')
    scontrol.chmod(0o755)
    full = {"SLURMD_NODENAME": "gpu-node-07", "SCONTROL": str(scontrol), **env}
    out = subprocess.run(
        [sys.executable, str(HEALTHCHECK)], env=full, capture_output=True, text=True, timeout=30
    )
    assert not calls.exists(), calls.read_text()
    return out


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"DISKINFO_DRAIN_ON": "bogus"}, "DISKINFO_DRAIN_ON must be busy or saturated"),
        ({"DISKINFO_TIMEOUT": "soon"}, "DISKINFO_TIMEOUT must be a number"),
    ],
)
def test_bad_settings_are_one_line(tmp_path: Path, env: dict[str, str], says: str):
    out = healthcheck(tmp_path, **env)
    assert out.returncode == 2 and says in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_an_unreadable_monitor_leaves_the_node_alone(tmp_path: Path):
    url = f"http://127.0.0.1:{free_port()}/status"
    out = healthcheck(tmp_path, DISKINFO_STATUS_URL=url, PATH=os.environ.get("PATH", ""))
    assert out.returncode == 0 and out.stdout == ""
    assert "gpu-node-07: monitor not readable at" in out.stderr and "left as it is" in out.stderr
    assert out.stderr.count("\n") == 1
