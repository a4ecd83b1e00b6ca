"""A Slurm job in containers, the way pyxis/enroot or Apptainer run one: on the three-node Slurm
of tests/system (slurmctld and one slurmd per node on 127.0.0.2-4), an ordinary user's
`sbatch -N3` job runs `srun` with a step in the image through `ch-run` on every node. Each
node's monitor writes its own records (logs/NODE: every node shares the working folder), and
the job's exit status is Slurm's: the step's exit code. Needs the 3-node cluster alone: run
under `flock /tmp/slurm.lock`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import charliecloud
from tests.helpers.net import wait_until
from tests.system.test_slurm_cluster import NODES, SBIN, TOOLS, Cluster, Node

pytestmark = [
    pytest.mark.image,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="slurmd needs root"),
]

LOOP_PY = """\
import os, sys, time
end = time.monotonic() + 4
while time.monotonic() < end:
    for name in os.listdir("/usr/lib/python3/dist-packages")[:100]:
        os.stat(os.path.join("/usr/lib/python3/dist-packages", name))
    time.sleep(0.02)
print(f"step on {os.environ.get('SLURMD_NODENAME')} as uid {os.getuid()}", flush=True)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def cluster(image: str) -> Iterator[tuple[Cluster, Path, Path, tuple[int, int, str]]]:
    missing = [t for t in (*TOOLS, "srun") if shutil.which(t, path=SBIN) is None]
    if missing or not charliecloud.available():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"missing {missing or 'charliecloud'} (CI=true: .ci/run installs them)")
        pytest.skip(f"needs Slurm and Charliecloud ({missing})")
    ch_image = charliecloud.image_dir(image)
    with charliecloud.ordinary_user() as user:
        # the user reaches munged's socket, slurm.conf and their own project: not under root's
        # 0700 pytest folder
        base = Path(tempfile.mkdtemp(prefix="diskinfo-slurm-ch."))
        os.chmod(base, 0o755)
        project = base / "project"
        project.mkdir()
        (project / "loop.py").write_text(LOOP_PY)
        os.chown(project, user[0], user[1])
        # no monitor of the health check's kind here: its /status never answers, which the
        # health check takes as "change nothing"
        nodes = {
            name: Node(name, addr, base, "", f"http://{addr}:9/status", "")
            for name, addr in NODES.items()
        }
        cluster = Cluster(base / "slurm", nodes)
        try:
            yield cluster, ch_image, project, user
        finally:
            # a job a failed test left running: its steps outlive slurmd otherwise
            subprocess.run(["scancel", "-u", user[2]], env=cluster.env, capture_output=True)
            time.sleep(3)
            cluster.stop()
            shutil.rmtree(base, ignore_errors=True)


def submit(
    cluster: Cluster, ch_image: Path, project: Path, user, code: int, command: str = "",
    wait: bool = True,
) -> tuple[str, int]:  # fmt: skip
    """`sbatch -N3` as the user (`--wait`: until the job ends); (job id, sbatch's status)."""
    uid, gid, _ = user
    step = (
        f"srun -N3 ch-run --set-env --set-env=DISKINFO_INTERVAL=1 --set-env=METRICS_PORT=0"
        f" -b {project}:/workspace -c /workspace {ch_image} --"
        f" diskinfo run -- {command or f'python3 loop.py {code}'}"
    )
    argv = [
        *charliecloud.as_user(uid, gid), "env", f"SLURM_CONF={cluster.conf}", f"PATH={SBIN}",
        "sbatch", "--parsable", *(["--wait"] if wait else []), "-N3", "-t", "3",
        "-D", str(project), "-o", f"{project}/job-%j.out", "--wrap", step,
    ]  # fmt: skip
    out = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    job = out.stdout.strip().split(";")[0]
    assert job.isdigit(), out.stdout + out.stderr
    return job, out.returncode


def test_an_sbatch_job_runs_a_step_in_the_image_on_three_nodes(cluster):
    slurm, ch_image, project, user = cluster
    job, status = submit(slurm, ch_image, project, user, 0)
    text = (project / f"job-{job}.out").read_text()
    assert status == 0, text[-4000:]
    info = slurm.job(job)
    assert (info["JobState"], info["ExitCode"]) == ("COMPLETED", "0:0"), info
    for name in NODES:
        assert f"step on {name} as uid {user[0]}" in text, text[-4000:]
        logs = project / "logs" / name
        records = [json.loads(line) for line in (logs / "diskinfo.jsonl").read_text().splitlines()]
        assert records and all(r["verdict"] for r in records), name
        assert all(p.stat().st_uid == user[0] for p in logs.iterdir())
        assert "[Run]" in (logs / "diskinfo.log").read_text(), name
    assert len(re.findall(r"Z \[Run\] ", text)) == 3, text[-4000:]
    # HOME in the read-only image: said once on each node, with the fix
    assert text.count("cannot be written (Read-only file system)") == 3, text[-4000:]
    assert "Traceback" not in text and text.count("Read-only file system") == 3, text[-4000:]


def test_the_jobs_exit_status_is_the_steps(cluster):
    slurm, ch_image, project, user = cluster
    job, status = submit(slurm, ch_image, project, user, 3)
    text = (project / f"job-{job}.out").read_text()
    assert status == 3, text[-4000:]
    wait_until(lambda: slurm.job(job)["JobState"] == "FAILED", 30, lambda: slurm.job(job))
    assert slurm.job(job)["ExitCode"] == "3:0", slurm.job(job)
    assert text.count("the training command failed: exit status 3") == 3, text[-4000:]


def test_scancel_ends_the_step_and_every_node_still_writes_its_run_line(cluster):
    """scancel (as a time limit does) sends SIGTERM to every process of the step: the command
    ends, and each node's monitor still closes its run with the [Run] line."""
    slurm, ch_image, project, user = cluster

    def runs() -> dict[str, int]:
        return {
            name: (project / "logs" / name / "diskinfo.log").read_text().count("[Run]")
            if (project / "logs" / name / "diskinfo.log").exists() else 0
            for name in NODES
        }  # fmt: skip

    def records() -> dict[str, int]:
        return {
            name: len((project / "logs" / name / "diskinfo.jsonl").read_text().splitlines())
            if (project / "logs" / name / "diskinfo.jsonl").exists() else 0
            for name in NODES
        }  # fmt: skip

    before, sampled = runs(), records()
    job, _ = submit(slurm, ch_image, project, user, 0, "bash -c 'echo started; sleep 600'", False)
    out = project / f"job-{job}.out"
    started = lambda: out.exists() and out.read_text().splitlines().count("started") == 3  # noqa: E731
    wait_until(started, 60,
               lambda: out.read_text() if out.exists() else "no output yet")  # fmt: skip
    # every node's monitor has sampled this run (a run it has not sampled has nothing to sum up)
    wait_until(lambda: all(records()[n] > sampled[n] for n in NODES), 30, records)
    slurm.run("scancel", job)
    wait_until(lambda: slurm.job(job)["JobState"] == "CANCELLED", 60, lambda: slurm.job(job))
    wait_until(lambda: all(runs()[n] == before[n] + 1 for n in NODES), 30,
               lambda: (before, runs(), out.read_text()[-3000:]))  # fmt: skip
