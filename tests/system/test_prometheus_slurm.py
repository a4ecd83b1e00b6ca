"""The Slurm prolog in a real single-node Slurm (Debian's slurmctld, slurmd, munge) on
loopback, steered by a real `diskinfo watch` on a loop device under fio load: a job starts on
a calm node; on a saturated one the prolog refuses it, Slurm drains the node and requeues the
job; once the load is gone and the node resumed, the job runs."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.daemons import Daemons
from tests.helpers.loopdev import ext4_loop
from tests.helpers.net import free_port, wait_until

PROLOG = ROOT / "monitoring/slurm/prolog.sh"
DISKINFO = Path(sys.executable).with_name("diskinfo")
TOOLS = ("slurmctld", "slurmd", "munged", "sbatch", "scontrol")
SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
NODE = "ditest1"

pytestmark = [
    pytest.mark.system,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="slurmd and loop devices need root"),
    pytest.mark.tools(*TOOLS, "fio", path=SBIN),
]


@pytest.fixture
def loop_fs(tmp_path: Path) -> Iterator[Path]:
    with ext4_loop(tmp_path) as fs:
        yield fs[0]


@pytest.fixture
def monitor(loop_fs: Path, tmp_path: Path) -> Iterator[tuple[Path, int]]:
    port = free_port()
    proc = subprocess.Popen(
        [str(DISKINFO), "watch", str(loop_fs), "--interval", "1", "--log-dir",
         str(tmp_path / "logs"), "--metrics-port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_until(lambda: pressure(port) != "unknown", 20, "the monitor's first record")
        yield loop_fs, port
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def pressure(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=3) as r:
        return json.loads(r.read())["pressure"]


class Slurm:
    """slurmctld + slurmd + munged, all on loopback, all state under one temp directory."""

    def __init__(self, tmp: Path, status_url: str) -> None:
        self.dir = tmp
        tmp.mkdir()
        self.daemons = Daemons(tmp)
        host = socket.gethostname().split(".")[0]
        key = tmp / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o400)
        self.sock = tmp / "munge.sock"
        # the site's prolog: environment for the shipped script, then the script itself
        wrapper = tmp / "prolog"
        wrapper.write_text(
            "#!/bin/bash\n"
            f"export DISKINFO={DISKINFO} DISKINFO_STATUS_URL={status_url}\n"
            f"bash {PROLOG} 2>>{tmp}/prolog.err\n"
            f'rc=$?; echo "job $SLURM_JOB_ID rc=$rc" >>{tmp}/prolog.log; exit $rc\n'
        )
        wrapper.chmod(0o755)
        (tmp / "state").mkdir()
        (tmp / "spool").mkdir()
        self.conf = tmp / "slurm.conf"
        self.conf.write_text(
            f"""ClusterName=diskinfo
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.sock}
CredType=cred/munge
StateSaveLocation={tmp}/state
SlurmdSpoolDir={tmp}/spool
SlurmctldPidFile={tmp}/slurmctld.pid
SlurmdPidFile={tmp}/slurmd.pid
SlurmctldLogFile={tmp}/slurmctld.log
SlurmdLogFile={tmp}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/linear
SchedulerType=sched/builtin
MpiDefault=none
Prolog={wrapper}
PrologFlags=Alloc
NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=5 State=UP
"""
        )
        self.env = dict(os.environ, SLURM_CONF=str(self.conf), PATH=SBIN)
        self._start(["munged", "-F", f"--socket={self.sock}", f"--key-file={key}",
                     f"--pid-file={tmp}/munged.pid", f"--log-file={tmp}/munged.log",
                     f"--seed-file={tmp}/munged.seed", "--force"])  # fmt: skip
        wait_until(self.sock.exists, 10, "munged's socket")
        self._start(["slurmctld", "-D", "-i", "-f", str(self.conf)])
        self._start(["slurmd", "-D", "-N", NODE, "-f", str(self.conf)])
        wait_until(lambda: self.node_state() == "IDLE", 30, f"{NODE} idle")

    def _start(self, argv: list[str]) -> None:
        self.daemons.start(argv[0], argv, env=self.env)

    def run(self, *argv: str) -> str:
        out = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, f"{argv}: {out.stdout}{out.stderr}"
        return out.stdout

    def node(self) -> str:
        return self.run("scontrol", "show", "node", NODE)

    def node_state(self) -> str:
        return re.search(r"State=(\S+)", self.node()).group(1)

    def submit(self) -> str:
        out = self.run("sbatch", "--parsable", "-o", f"{self.dir}/job-%j.out", "--wrap", "true")
        return out.strip().split(";")[0]

    def job(self, job_id: str) -> str:
        return self.run("scontrol", "show", "job", job_id)

    def stop(self) -> None:
        self.daemons.stop()


def job_state(slurm: Slurm, job_id: str) -> str:
    return re.search(r"JobState=(\S+)", slurm.job(job_id)).group(1)


def test_slurm_keeps_jobs_off_a_saturated_node(monitor, tmp_path: Path):
    mnt, port = monitor
    slurm = Slurm(tmp_path / "slurm", f"http://127.0.0.1:{port}/status")
    fio = None
    try:
        # calm node: the job runs
        calm = slurm.submit()
        wait_until(lambda: job_state(slurm, calm) == "COMPLETED", 30, "the calm job to complete")
        assert "DRAIN" not in slurm.node_state()

        fio = subprocess.Popen(
            ["fio", "--name=load", f"--filename={mnt}/load", "--size=64M", "--rw=randread",
             "--bs=64k", "--direct=1", "--ioengine=libaio", "--iodepth=32", "--numjobs=3",
             "--time_based", "--runtime=40", "--output-format=terse"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_until(lambda: pressure(port) == "saturated", 20, "saturation under fio")
        refused = slurm.submit()
        wait_until(lambda: "DRAIN" in slurm.node_state(), 30, "Slurm to drain the node")
        node = slurm.node()
        assert "Reason=Prolog error" in node, node
        job = wait_until(
            lambda: (j := slurm.job(refused)) and "requeued" in j and j, 30, "the requeue"
        )
        assert "JobState=PENDING" in job and "Restarts=1" in job, job
        err = (slurm.dir / "prolog.err").read_text()
        assert f"job {refused} refused" in err and "saturated" in err, err

        fio.terminate()
        fio.wait(timeout=30)
        fio = None
        wait_until(lambda: pressure(port) != "saturated", 20, "the load to pass")
        slurm.run("scontrol", "update", f"NodeName={NODE}", "State=RESUME")
        slurm.run("scontrol", "release", refused)
        # Slurm holds a requeued job back for 2 minutes (BeginTime); don't wait for that here
        slurm.run("scontrol", "update", f"JobId={refused}", "StartTime=now")
        wait_until(
            lambda: job_state(slurm, refused) == "COMPLETED",
            60,
            lambda: f"the requeued job to run: {slurm.job(refused)}\n{slurm.node()}",
        )
        log = (slurm.dir / "prolog.log").read_text()
        assert f"job {calm} rc=0" in log and f"job {refused} rc=1" in log, log
    finally:
        if fio is not None:
            fio.terminate()
            fio.wait(timeout=30)
        slurm.stop()
