"""`diskinfo status` against a metrics port someone else holds: a flood, a trickle and escape
codes in the JSON are bounded, cut and escaped (docs/security.md, "What the monitor
publishes"). The Slurm health check's twins: tests/system/test_slurm_healthcheck.py."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers.hostile_monitor import HostileMonitor, run_measured


def status(url: str, timeout: str = "3") -> tuple[subprocess.CompletedProcess, float, float]:
    """`diskinfo status --url URL`: its result, seconds taken and peak memory in MiB."""
    argv = [sys.executable, "-m", "diskinfo.cli", "status", "--url", url, "--timeout", timeout]
    return run_measured(argv)


def test_a_flood_is_cut_at_the_cap():
    with HostileMonitor("flood") as monitor:  # a deadline far off: the cap is what cuts
        out, _, peak = status(monitor.url, timeout="20")
        sent = monitor.sent
    assert out.returncode == 1 and out.stdout == "", out
    assert "answered more than 1048576 bytes" in out.stderr and out.stderr.count("\n") == 1
    assert peak < 150, f"{peak:.0f} MiB for a reply of {sent >> 20} MiB"


def test_a_trickle_is_cut_at_the_deadline():
    with HostileMonitor("trickle", pace=0.5, trickle_s=25) as monitor:
        out, elapsed, _ = status(monitor.url, timeout="2")
    assert out.returncode == 1 and "no whole answer within 2 s" in out.stderr, out
    assert elapsed < 8, elapsed


def test_escape_codes_in_the_answer_reach_no_terminal():
    doc = {"pressure": "saturated", "verdict": "\x1b]0;owned\x07\x1b[2J\nok", "devices": []}
    with HostileMonitor("json", doc) as monitor:
        out, _, _ = status(monitor.url)
    assert out.returncode == 0, out
    assert all(" " <= ch <= "~" for line in out.stdout.splitlines() for ch in line), out.stdout
    assert json.loads(out.stdout)["verdict"] == doc["verdict"]
