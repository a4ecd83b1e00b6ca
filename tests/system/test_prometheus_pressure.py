"""Node pressure end to end on this machine's kernel: a real `diskinfo watch` on a loop device,
real fio load, `diskinfo status` and the Slurm prolog reading the running monitor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.loopdev import ext4_loop
from tests.helpers.net import free_port, wait_until

PROLOG = ROOT / "monitoring/slurm/prolog.sh"
DISKINFO = Path(sys.executable).with_name("diskinfo")

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(os.geteuid() != 0, reason="loop devices need root"),
    pytest.mark.tools("fio"),
]


@pytest.fixture
def loop_fs(tmp_path: Path):
    """An ext4 filesystem on a loop device: only this test's I/O lands on it."""
    with ext4_loop(tmp_path) as fs:
        yield fs


def status(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=3) as r:
        return json.loads(r.read())


def prolog(port: int, **env: str) -> subprocess.CompletedProcess[str]:
    full = dict(
        os.environ,
        DISKINFO=str(DISKINFO),
        DISKINFO_STATUS_URL=f"http://127.0.0.1:{port}/status",
        SLURM_JOB_ID="4242",
        **env,
    )
    return subprocess.run(
        ["bash", str(PROLOG)], env=full, capture_output=True, text=True, timeout=30
    )


def test_prolog_steers_jobs_by_the_running_monitors_pressure(loop_fs, tmp_path):
    mnt, dev = loop_fs
    port = free_port()
    logs = tmp_path / "logs"
    monitor = subprocess.Popen(
        [str(DISKINFO), "watch", str(mnt), "--interval", "1", "--log-dir", str(logs),
         "--metrics-port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_until(lambda: status(port)["pressure"] != "unknown", 20, "a first record")
        idle = status(port)
        assert idle["pressure"] in ("ok", "busy"), idle  # loop device idle; vda is shared
        assert dev in {d["device"] for d in idle["devices"]}
        out = prolog(port)
        assert out.returncode == 0, out.stderr

        fio = subprocess.Popen(
            ["fio", "--name=load", f"--filename={mnt}/load", "--size=64M", "--rw=randread",
             "--bs=64k", "--direct=1", "--ioengine=libaio", "--iodepth=32", "--numjobs=3",
             "--time_based", "--runtime=15", "--output-format=terse"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            hot = wait_until(
                lambda: (s := status(port))["pressure"] == "saturated" and s, 14, "saturation"
            )
            loop = next(d for d in hot["devices"] if d["device"] == dev)
            assert loop["pressure"] == "saturated" and loop["util"] >= 95
            assert any(f"{dev}: %util" in e for e in hot["evidence"])
            out = prolog(port)
            assert out.returncode == 1
            assert "job 4242 refused" in out.stderr and '"saturated"' in out.stderr
            cli = subprocess.run(
                [str(DISKINFO), "status", "--url", f"http://127.0.0.1:{port}/status",
                 "--fail-on", "saturated"],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
            assert cli.returncode == 3 and json.loads(cli.stdout)["pressure"] == "saturated"
        finally:
            fio.terminate()
            fio.wait(timeout=30)
        wait_until(lambda: status(port)["pressure"] != "saturated", 15, "the load to pass")
        assert prolog(port).returncode == 0
    finally:
        monitor.send_signal(signal.SIGTERM)
        assert monitor.wait(timeout=30) == 0, monitor.stderr.read()
    # the monitor is gone: let jobs through unless told to be strict, with a one-line reason
    out = prolog(port)
    assert out.returncode == 0 and "cannot check storage pressure" in out.stderr
    assert prolog(port, DISKINFO_PROLOG_STRICT="1").returncode == 1
    assert prolog(port, DISKINFO_BLOCK_ON="bogus").returncode == 1
