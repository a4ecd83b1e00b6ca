"""monitoring/slurm/healthcheck.py where no Slurm is needed: bad settings are one line and exit
2; a monitor that cannot be read leaves the node alone (scontrol is never called)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.hostile_monitor import HostileMonitor, run_measured
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


# --- a metrics port taken by someone else (docs/security.md, "What the monitor publishes") ---

SHOW_NODE = "NodeName=gpu-node-07 Arch=x86_64 State=IDLE ThreadsPerCore=1 Reason=(null)"


def recording_scontrol(tmp_path: Path) -> tuple[Path, Path]:
    """An scontrol that shows an idle node and records each call's argv as a JSON line."""
    calls = tmp_path / "scontrol-argv"
    scontrol = tmp_path / "scontrol-rec"
    scontrol.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(calls)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        f"print({SHOW_NODE!r}) if sys.argv[1] == 'show' else None\n"
    )
    scontrol.chmod(0o755)
    return scontrol, calls


def run_against(tmp_path: Path, url: str, timeout: str = "3") -> tuple[dict, list, float]:
    """The health check against `url`: its output, scontrol's calls, its peak memory (MiB)."""
    scontrol, calls = recording_scontrol(tmp_path)
    env = {"SLURMD_NODENAME": "gpu-node-07", "SCONTROL": str(scontrol),
           "DISKINFO_STATUS_URL": url, "DISKINFO_TIMEOUT": timeout}  # fmt: skip
    done, elapsed, peak = run_measured([sys.executable, str(HEALTHCHECK)], env=env, timeout=30)
    argv = [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []
    return (
        {"rc": done.returncode, "out": done.stdout, "err": done.stderr, "elapsed": elapsed},
        argv,
        peak,
    )


def test_a_forged_status_drains_with_a_printable_bounded_reason(tmp_path: Path):
    doc = {
        "pressure": "saturated",
        "verdict": "input-bound",
        "devices": [
            {"device": "nvme0n1\x1b[2J\x1b[31m\nNodeName=login01 State=DOWN" + "A" * 500,
             "pressure": "saturated", "r_await": "lots", "util": 99, "await_ms": [1]},
            {"device": "sdb", "pressure": "extreme"},
            "not a device",
        ],
    }  # fmt: skip
    with HostileMonitor("json", doc) as monitor:
        result, argv, _ = run_against(tmp_path, monitor.url)
    assert result["rc"] == 0, result
    (update,) = [a for a in argv if a[0] == "update"]
    reason = next(a for a in update if a.startswith("Reason="))
    assert reason.startswith("Reason=diskinfo: nvme0n1?[2J?[31m?NodeName=login01"), reason
    assert all(" " <= ch <= "~" for ch in reason) and len(reason) <= len("Reason=") + 160, reason
    # the name is cut, the figures stay; a figure that is no number reads 0
    assert reason.endswith("... saturated, r_await 0 ms, %util 99"), reason
    assert all(" " <= ch <= "~" for ch in result["out"].rstrip("\n")), result["out"]


def test_a_flood_costs_at_most_the_cap_and_changes_nothing(tmp_path: Path):
    with HostileMonitor("flood") as monitor:  # a deadline far off: the cap is what cuts
        result, argv, peak = run_against(tmp_path, monitor.url, timeout="20")
        sent = monitor.sent
    assert result["rc"] == 0 and argv == [], (result, argv)
    assert "more than 1048576 bytes" in result["err"] and "left as it is" in result["err"]
    assert peak < 80, f"{peak:.0f} MiB for a reply of {sent >> 20} MiB"
    print(f"\nflood: read cut after {sent >> 20} MiB sent, peak {peak:.0f} MiB")


def test_a_trickle_is_cut_at_the_deadline(tmp_path: Path):
    with HostileMonitor("trickle", pace=0.5, trickle_s=25) as monitor:
        result, argv, _ = run_against(tmp_path, monitor.url, timeout="2")
    assert result["rc"] == 0 and argv == [], (result, argv)
    assert result["elapsed"] < 6, result
    assert "no whole answer within 2 s" in result["err"], result["err"]
