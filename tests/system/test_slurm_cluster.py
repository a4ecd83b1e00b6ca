"""Jobs kept off a node whose storage is saturated, in a real Slurm cluster on this machine:
Debian's slurmctld and munged, three slurmd (one per compute node, each on its own loopback
address, 127.0.0.2-4), and on each node a real `diskinfo watch` on the node's own data device
(an ext4 loop device backed by /dev/shm, so that only the test's I/O reaches it and no shared
disk under it enters the figures). Slurm runs monitoring/slurm/healthcheck.py as its
HealthCheckProgram every 5 s.

fio saturates one node's data device while jobs are queued: the node is drained with the reason
in words, the job running there finishes, queued jobs run on the two others; when fio ends the
node takes jobs again with no admin step. Every job completes, none is requeued or killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.daemons import Daemons
from tests.helpers.loopdev import ReadCap, ext4_loop
from tests.helpers.net import free_port, wait_until

HEALTHCHECK = ROOT / "monitoring/slurm/healthcheck.py"
DISKINFO = Path(sys.executable).with_name("diskinfo")
TOOLS = ("slurmctld", "slurmd", "munged", "sbatch", "scontrol", "sinfo")
SBIN = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
NODES = {f"dinode{i}": f"127.0.0.{i + 1}" for i in (1, 2, 3)}
HOT = "dinode2"
HEALTH_S = 5  # HealthCheckInterval
JOB_S = 3
READ_IOPS = 40  # the saturated node's cap: fio's 16 reads in flight wait ~400 ms each

pytestmark = [
    pytest.mark.system,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="slurmd and loop devices need root"),
    pytest.mark.tools(*TOOLS, "fio", path=SBIN),
    pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm"),
    pytest.mark.skipif(
        not ReadCap.available(), reason="needs cgroup v1 blkio or v2 io to cap reads"
    ),
]


@dataclass
class Node:
    name: str
    addr: str
    mnt: Path
    dev: str
    url: str
    lower: str  # MAJ:MIN of the device under the data device, where reads can be capped


@contextlib.contextmanager
def data_device(directory: Path) -> Iterator[tuple[Path, str, str]]:
    """A node's data device: an ext4 loop device read directly (--direct-io=on) from a file on a
    second loop device, which /dev/shm backs. A cgroup's read cap on the lower device makes a
    reader's every read on the upper one wait, as on a disk at its IOPS limit, with no shared
    disk of this machine under either. Yields (mount point, device name, lower MAJ:MIN)."""
    (directory / "lower").mkdir()
    with ext4_loop(directory / "lower", 160) as (lower_mnt, lower_dev):
        devno = Path(f"/sys/class/block/{lower_dev}/dev").read_text().strip()
        with ext4_loop(lower_mnt, 96, "--direct-io=on") as (mnt, dev):
            yield mnt, dev, devno


def status(node: Node) -> dict:
    with urllib.request.urlopen(node.url, timeout=3) as r:
        return json.loads(r.read())


class Cluster:
    """munged, slurmctld and one slurmd per node, all state under one directory."""

    def __init__(self, tmp: Path, nodes: dict[str, Node]) -> None:
        self.dir, self.nodes = tmp, nodes
        tmp.mkdir()
        self.daemons = Daemons(tmp)
        host = socket.gethostname().split(".")[0]
        key = tmp / "munge.key"
        key.write_bytes(os.urandom(128))
        key.chmod(0o400)
        sock = tmp / "munge.sock"
        (tmp / "state").mkdir()
        self.conf = tmp / "slurm.conf"
        # slurmd hands the health check only SLURMD_NODENAME: the site's wrapper says where
        # slurm.conf and the node's monitor are (on a real node: the defaults)
        urls = "".join(f"  {n.name}) url={n.url} ;;\n" for n in nodes.values())
        wrapper = tmp / "healthcheck"
        wrapper.write_text(
            "#!/bin/bash\n"
            f"export SLURM_CONF={self.conf} PATH={SBIN}\n"
            f"case $SLURMD_NODENAME in\n{urls}esac\n"
            f"DISKINFO_STATUS_URL=$url exec {sys.executable} {HEALTHCHECK} "
            f">>{tmp}/healthcheck-$SLURMD_NODENAME.log 2>&1\n"
        )
        wrapper.chmod(0o755)
        node_lines = "".join(
            f"NodeName={n.name} NodeHostname={host} NodeAddr={n.addr} Port={free_port()} "
            "CPUs=1 State=UNKNOWN\n"
            for n in nodes.values()
        )
        self.conf.write_text(
            f"""ClusterName=diskinfo
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
StateSaveLocation={tmp}/state
SlurmdSpoolDir={tmp}/spool-%n
SlurmctldPidFile={tmp}/slurmctld.pid
SlurmdPidFile={tmp}/slurmd-%n.pid
SlurmctldLogFile={tmp}/slurmctld.log
SlurmdLogFile={tmp}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/linear
SchedulerType=sched/builtin
MpiDefault=none
MinJobAge=900
HealthCheckProgram={wrapper}
HealthCheckInterval={HEALTH_S}
HealthCheckNodeState=ANY
{node_lines}PartitionName=debug Nodes=ALL Default=YES MaxTime=5 State=UP
"""
        )
        self.env = dict(os.environ, SLURM_CONF=str(self.conf), PATH=SBIN)
        self._start("munged", ["munged", "-F", f"--socket={sock}", f"--key-file={key}",
                               f"--pid-file={tmp}/munged.pid", f"--log-file={tmp}/munged.log",
                               f"--seed-file={tmp}/munged.seed", "--force"])  # fmt: skip
        wait_until(sock.exists, 10, "munged's socket")
        self._start("slurmctld", ["slurmctld", "-D", "-i", "-f", str(self.conf)])
        for name in nodes:
            self._start(f"slurmd-{name}", ["slurmd", "-D", "-N", name, "-f", str(self.conf)])
        wait_until(
            lambda: all(self.state(n) == "IDLE" for n in nodes), 60, lambda: self.run("sinfo", "-N")
        )

    def _start(self, name: str, argv: list[str]) -> None:
        self.daemons.start(name, argv, env=self.env)

    def run(self, *argv: str) -> str:
        out = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, f"{argv}: {out.stdout}{out.stderr}"
        return out.stdout

    def state(self, node: str) -> str:
        return re.search(r"State=(\S+)", self.run("scontrol", "show", "node", node)).group(1)

    def submit(self, seconds: float = JOB_S, *extra: str) -> str:
        script = f'echo "$SLURMD_NODENAME $(date +%s.%N)"; sleep {seconds}'
        out = self.run(
            "sbatch", "--parsable", "-o", f"{self.dir}/job-%j.out", *extra, "--wrap", script
        )
        return out.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        text = self.run("scontrol", "show", "job", "-o", job_id)
        return dict(re.findall(r"(\w+)=(\S*)", text))

    def started(self, job_id: str) -> tuple[str, float]:
        """(node, Unix time) at which the job's script began, from its own output."""
        node, at = (self.dir / f"job-{job_id}.out").read_text().split()[:2]
        return node, float(at)

    def done(self, ids: list[str]) -> bool:
        return all(self.job(i)["JobState"] == "COMPLETED" for i in ids)

    def stop(self) -> None:
        self.daemons.stop()


@pytest.fixture
def nodes() -> Iterator[dict[str, Node]]:
    """Each node's data device and its running monitor on the node's address."""
    port = free_port()
    with contextlib.ExitStack() as stack:
        shm = Path(stack.enter_context(tempfile.TemporaryDirectory(dir="/dev/shm")))
        found: dict[str, Node] = {}
        procs = []
        for name, addr in NODES.items():
            (shm / name).mkdir()
            mnt, dev, lower = stack.enter_context(data_device(shm / name))
            found[name] = Node(name, addr, mnt, dev, f"http://{addr}:{port}/status", lower)
            logs = str(shm / name / "logs")
            argv = [str(DISKINFO), "watch", str(mnt), "--interval", "1", "--log-dir", logs,
                    "--metrics-addr", addr, "--metrics-port", str(port)]  # fmt: skip
            out = subprocess.DEVNULL
            procs.append(subprocess.Popen(argv, stdout=out, stderr=out))
        try:
            for node in found.values():
                wait_until(lambda n=node: status(n)["pressure"] in ("ok", "busy"), 30, node.name)
            yield found
        finally:
            for proc in procs:
                proc.send_signal(signal.SIGTERM)
            for proc in procs:
                proc.wait(timeout=30)


def test_a_saturated_node_gets_no_new_jobs_until_its_storage_calms(nodes, tmp_path: Path):
    cluster = Cluster(tmp_path / "slurm", nodes)
    hot = nodes[HOT]
    fio = None
    capped: ReadCap | None = None
    ids: list[str] = []
    try:
        # calm: every node takes jobs
        calm = [cluster.submit() for _ in range(6)]
        ids += calm
        wait_until(lambda: cluster.done(calm), 90, "the calm jobs")
        assert {cluster.started(i)[0] for i in calm} == set(nodes)

        # a job running on the node when its storage saturates, and the load
        running = cluster.submit(8, "-w", HOT)
        ids.append(running)
        wait_until(lambda: cluster.job(running)["JobState"] == "RUNNING", 30, "the long job")
        fill = ["fio", "--name=fill", f"--filename={hot.mnt}/load", "--size=32M", "--rw=write",
                "--bs=1M", "--direct=1"]  # fmt: skip
        subprocess.run(fill, check=True, capture_output=True)
        # fio reads flat out in a cgroup whose reads on the lower device are capped: the data
        # device is at its limit whatever the CPU does on this shared machine
        capped = ReadCap(f"diskinfo-slurm-{os.getpid()}", hot.lower, read_iops=READ_IOPS)
        fio_cmd = ("fio --name=load --filename={} --size=32M --rw=randread --bs=4k --direct=1 "
                   "--ioengine=libaio --iodepth=8 --numjobs=2 --time_based --runtime=120 "
                   "--output-format=terse").format(hot.mnt / "load")  # fmt: skip
        fio = subprocess.Popen(
            ["sh", "-c", f"echo $$ > {capped.path}/cgroup.procs; exec {fio_cmd}"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        t_load = time.time()
        wait_until(lambda: status(hot)["pressure"] == "saturated", 30, "saturation under fio")
        t_saturated = time.time()
        wait_until(lambda: "DRAIN" in cluster.state(HOT), 3 * HEALTH_S + 10, "the drain")
        t_drained = time.time()

        # what an admin reads
        sinfo = cluster.run("sinfo", "-R", "-h", "-o", "%N|%E")
        reason = dict(line.split("|", 1) for line in sinfo.splitlines())[HOT]
        assert re.fullmatch(rf"diskinfo: {hot.dev} saturated, r_await \d+ ms, %util \d+", reason), (
            sinfo
        )
        assert set(dict(line.split("|", 1) for line in sinfo.splitlines())) == {HOT}, sinfo

        # queued jobs run on the others; the running one finishes where it is
        queued = [cluster.submit() for _ in range(8)]
        ids += queued
        wait_until(lambda: cluster.done([running, *queued]), 120, "the queued jobs")
        assert cluster.started(running)[0] == HOT
        assert HOT not in {cluster.started(i)[0] for i in queued}
        assert "DRAIN" in cluster.state(HOT)  # held while the load lasts, dips included

        # the load ends: the node comes back by itself and takes jobs again
        fio.terminate()
        fio.wait(timeout=30)
        fio = None
        t_unloaded = time.time()
        wait_until(lambda: "DRAIN" not in cluster.state(HOT), 3 * HEALTH_S + 10, "the resume")
        t_resumed = time.time()
        assert cluster.run("sinfo", "-R", "-h").strip() == ""
        after = [cluster.submit() for _ in range(6)]
        ids += after
        wait_until(lambda: cluster.done(after), 90, "the jobs after the load")
        assert HOT in {cluster.started(i)[0] for i in after}

        # a node an admin drained is not the health check's to resume
        other = next(n for n in nodes if n != HOT)
        cluster.run("scontrol", "update", f"NodeName={other}", "State=DRAIN", "Reason=disk swap")
        time.sleep(2 * HEALTH_S + 1)
        assert "DRAIN" in cluster.state(other) and status(nodes[other])["pressure"] == "ok"
        assert "Reason=disk swap" in cluster.run("scontrol", "show", "node", other)
        cluster.run("scontrol", "update", f"NodeName={other}", "State=RESUME")

        # nothing killed, requeued or lost
        for i in ids:
            job = cluster.job(i)
            assert (job["JobState"], job["ExitCode"], job["Restarts"]) == ("COMPLETED", "0:0", "0")
        starts = {i: cluster.started(i) for i in ids}
        on_hot = [at for node, at in starts.values() if node == HOT]
        assert not [at for at in on_hot if t_drained < at < t_unloaded]
        per_node = Counter(node for node, _ in starts.values())
        print(
            f"\nstopped placing: drained {t_drained - t_load:.1f} s after the load began "
            f"({t_drained - t_saturated:.1f} s after /status said saturated); "
            f"back {t_resumed - t_unloaded:.1f} s after it ended; "
            f"jobs per node {dict(sorted(per_node.items()))} of {len(ids)}, all COMPLETED 0:0; "
            f"reason {reason!r}"
        )
        print(f"health checks: {(cluster.dir / f'healthcheck-{HOT}.log').read_text()}")
    finally:
        if fio is not None:
            fio.terminate()
            fio.wait(timeout=30)
        if capped is not None:
            capped.remove()
        cluster.stop()
