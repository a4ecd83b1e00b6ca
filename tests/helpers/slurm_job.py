"""A data-parallel job on the three-node Slurm of tests/system (test_slurm_cluster's cluster and
data devices), with each node's own `diskinfo watch` writing to its folder of one shared logs
folder: what tests/system/test_slurm_job.py checks and benchmarks/bench_job_verdict.py scores.

`srun -N3` starts tests/helpers/ddp_train.py, one rank per node (gloo on CPU, the rendezvous on
the first node's address); each rank reads its node's own data device and publishes to its
node's state folder, which only that node's monitor reads.

Scenarios: `balanced` (warm data everywhere), `disk` (one node's reads reach its device, whose
reads are capped at a few IOPS through cgroup v1 blkio / v2 io.max), `cpu` (one node's loader
workers under a CPU quota), `fixed` (the `disk` cap lifted mid-run).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path

from diskinfo.analyse import job
from diskinfo.record import IntervalRecord
from tests.helpers import cgroups
from tests.helpers.net import free_port, wait_until
from tests.system.test_slurm_cluster import NODES, Cluster, Node, data_device, status

DISKINFO = Path(sys.executable).with_name("diskinfo")
TRAIN = Path(__file__).with_name("ddp_train.py")
SLOW = "dinode2"  # the node whose data is capped or whose workers are starved
FILES = 400  # per node, 16 KiB each
READ_IOPS = 60  # the capped node's reads
CPU_QUOTA = 0.01  # cores the starved node's workers get: < 100 samples/s of the 160 needed
INTERVAL_S = 1.0


@dataclass
class Run:
    scenario: str
    seconds: float
    logs: Path
    nodes: dict[str, list[IntervalRecord]]
    lifted_at: float | None = None
    started: float = 0.0
    out: str = ""
    report: str = ""  # `diskinfo report` over the shared logs folder, where asked for


@contextlib.contextmanager
def job_nodes() -> Iterator[tuple[Path, dict[str, Node]]]:
    """Each node's data device holding FILES small files; yields (scratch folder, nodes)."""
    with contextlib.ExitStack() as stack:
        shm = Path(stack.enter_context(tempfile.TemporaryDirectory(dir="/dev/shm")))
        found: dict[str, Node] = {}
        port = free_port()
        for name, addr in NODES.items():
            (shm / name).mkdir()
            mnt, dev, lower = stack.enter_context(data_device(shm / name))
            rng = __import__("random").Random(hash(name) & 0xFFFF)
            for i in range(FILES):
                (mnt / f"{i:05d}.bin").write_bytes(rng.randbytes(16 << 10))
            os.sync()
            found[name] = Node(name, addr, mnt, dev, f"http://{addr}:{port}/status", lower)
        yield shm, found


@contextlib.contextmanager
def node_groups(nodes: dict[str, Node]) -> Iterator[dict[str, dict[str, Path]]]:
    """A cgroup (v1 cpu, cpuacct, blkio) per node standing in for the node's own machine: its
    monitor and its rank run there, so each monitor judges its node's CPU, not this shared
    machine's (all three nodes are one machine here, which other work loads too)."""
    with contextlib.ExitStack() as stack:
        yield {
            n: stack.enter_context(cgroups.group(f"diskinfo-job-{n}-{os.getpid()}")) for n in nodes
        }


@contextlib.contextmanager
def monitors(
    shm: Path, nodes: dict[str, Node], logs: Path, groups: dict[str, dict[str, Path]]
) -> Iterator[None]:
    """One `diskinfo watch` per node, in its node's cgroup: its own data device, its own state
    folder, its own folder of the shared logs folder, and the job's other folders as its job
    view."""
    procs = []
    port = int(next(iter(nodes.values())).url.rsplit(":", 1)[1].split("/")[0])
    try:
        for node in nodes.values():
            state = shm / node.name / "state"
            state.mkdir(exist_ok=True)
            argv = [
                str(DISKINFO),
                "watch",
                str(node.mnt),
                "--interval",
                str(INTERVAL_S),
                "--log-dir",
                str(logs / node.name),
                "--job-logs",
                str(logs),
                "--metrics-addr",
                node.addr,
                "--metrics-port",
                str(port),
            ]
            inside = ["sh", "-c", cgroups.enter(groups[node.name]) + 'exec "$@"', "sh", *argv]
            env = dict(os.environ, DISKINFO_STATE_DIR=str(state))
            err = open(shm / node.name / "monitor.err", "w")  # noqa: SIM115
            procs.append(subprocess.Popen(inside, stdout=subprocess.DEVNULL, stderr=err, env=env))
        for node in nodes.values():
            wait_until(lambda n=node: status(n)["pressure"] in ("ok", "busy"), 30, node.name)
        yield
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=30)


def _task_script(
    shm: Path,
    nodes: dict[str, Node],
    groups: dict[str, dict[str, Path]],
    args: dict[str, list[str]],
) -> Path:
    """What srun runs on each node: into the node's cgroup, that node's state folder and
    data, then the training."""
    cases = "".join(
        f"  {n.name}) {cgroups.enter(groups[n.name])}"
        f"export DISKINFO_STATE_DIR={shm / n.name / 'state'}; "
        f'set -- --data {n.mnt} {" ".join(args.get(n.name, []))} "$@";;\n'
        for n in nodes.values()
    )
    script = shm / "task.sh"
    script.write_text(
        f'#!/bin/bash\ncase $SLURMD_NODENAME in\n{cases}esac\nexec {sys.executable} {TRAIN} "$@"\n'
    )
    script.chmod(0o755)
    return script


def _started(path: Path) -> bool:
    """Whether the node's monitor has seen its rank's loop yet."""
    try:
        return any(
            json.loads(line).get("loader") and json.loads(line)["loader"].get("ranks")
            for line in path.read_text().splitlines()
            if line.strip()
        )
    except (OSError, ValueError):
        return False


def run_job(
    scenario: str,
    seconds: float = 36.0,
    lift_after: float | None = None,
    keep_report: bool = False,
) -> Run:
    """Start the cluster, the monitors and the job for `scenario`; the records when it ends.
    `lift_after`: seconds from the slow rank's first loop figures to lifting its cap."""
    with job_nodes() as (shm, nodes), contextlib.ExitStack() as stack:
        logs = shm / "job-logs"
        logs.mkdir()
        groups = stack.enter_context(node_groups(nodes))
        cluster = Cluster(shm / "slurm", nodes)
        stack.callback(cluster.stop)
        slow = nodes[SLOW]
        evict = scenario in ("disk", "fixed")
        args: dict[str, list[str]] = {n: ["--evict"] if evict else [] for n in nodes}
        cap = groups[SLOW]["blkio"] / "blkio.throttle.read_iops_device"
        if evict:  # the slow node's reads on the device under its data device, capped
            cap.write_text(f"{slow.lower} {READ_IOPS}\n")
        if scenario == "cpu":  # the slow node's loader workers in a child group with a quota
            cpu = groups[SLOW]["cpu"] / "loader"
            cpu.mkdir()
            (cpu / "cpu.cfs_period_us").write_text("100000\n")
            (cpu / "cpu.cfs_quota_us").write_text(f"{int(CPU_QUOTA * 100000)}\n")
            stack.callback(_remove_cgroup, cpu)
            args[SLOW] = ["--worker-cgroup", str(cpu)]
        script = _task_script(shm, nodes, groups, args)
        stack.enter_context(monitors(shm, nodes, logs, groups))
        env = dict(
            cluster.env,
            MASTER_ADDR=nodes["dinode1"].addr,
            MASTER_PORT=str(free_port()),
            GLOO_SOCKET_IFNAME="lo",
        )
        started = time.time()
        srun = subprocess.Popen(
            [
                "srun",
                "-N3",
                "--ntasks-per-node=1",
                "-t",
                "3",
                str(script),
                "--seconds",
                str(seconds),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        lifted = None
        if lift_after is not None and evict:
            wait_until(lambda: _started(logs / SLOW / "diskinfo.jsonl"), 60, "the slow rank")
            time.sleep(lift_after)
            cap.write_text(f"{slow.lower} 0\n")  # the storage fixed: no cap any more
            lifted = time.time()
        out, _ = srun.communicate(timeout=seconds + 120)
        assert srun.returncode == 0, out
        time.sleep(2 * INTERVAL_S)  # each monitor's last interval of the run
        stack.close()  # the monitors end and flush, the cluster stops
        records = {name: _read(logs / name / "diskinfo.jsonl") for name in nodes}
        report = ""
        if keep_report:
            shown = subprocess.run(
                [str(DISKINFO), "report", str(logs)], capture_output=True, text=True, timeout=60
            )
            report = (shown.stdout + shown.stderr).replace(str(shm), "$SCRATCH").rstrip()
    return Run(scenario, seconds, logs, records, lifted, started, out, report)


def _read(path: Path) -> list[IntervalRecord]:
    return [
        IntervalRecord.from_dict(json.loads(line))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def _remove_cgroup(path: Path) -> None:
    with contextlib.suppress(OSError):
        for pid in (path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (path.parent / "cgroup.procs").write_text(pid)
    with contextlib.suppress(OSError):
        path.rmdir()


# intervals (8 s) from the first with every rank heard, while the nodes' held verdicts settle
# (the verdict matrix: 10 s)
WARMUP = 8
TAIL = 2  # the last intervals: ranks leaving one by one


@dataclass
class Score:
    """Scored like the verdict matrix: the held job verdict over the steady intervals."""

    steady: int
    right_share: float
    changes_per_min: float
    held: dict[str, int]  # held verdicts seen in the steady intervals, in words
    others_waiting_share: float  # the non-slow nodes' held verdicts: "waits for another rank"
    others_compute_share: float  # ... and "compute-bound"
    slow_node_verdicts: dict[str, int]
    node_verdicts: dict[str, dict[str, int]]  # each node's held verdict and cause, counted
    back_after_s: float | None = None  # from the cap's lift to the held verdict balanced
    # whole intervals of the job's after the one the lift lands in, to the balanced one
    back_intervals: int | None = None
    summary: str = ""  # the job verdict's words in the last steady interval
    # for a failure's message: each steady interval's time (from the first) with the job's
    # decided and held verdict, and the slow node's own verdicts from a little before
    timeline: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        """The figures on one line, then the timeline a line an interval (a test prints it,
        and pytest shows it with a failure)."""
        shown = [f.name for f in fields(self) if f.name != "timeline"]
        figures = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return "\n".join([f"Score({figures})", *self.timeline])


def score(run: Run, expect: str, rank: int | None = None, cause: str = "") -> Score:
    ids = job.job_ids(r for recs in run.nodes.values() for r in recs)
    assert ids, "no rank of a distributed job in the records"
    points = job.timeline(list(run.nodes.values()), ids[-1])
    heard = [p for p in points if p[1].ranks_seen == p[1].world_size]
    first = heard[0][0] if heard else 0.0
    steady = [p for p in points if p[0] >= first + WARMUP * INTERVAL_S][: -TAIL or None]
    lifted = run.lifted_at
    if lifted is not None:  # the stretch before the lift is scored; after it, the return
        after = [p for p in steady if p[0] > lifted]
        back = next((p[0] for p in after if p[2].kind == job.BALANCED), None)
        back_n = next((i for i, p in enumerate(after) if p[2].kind == job.BALANCED), None)
        steady = [p for p in steady if p[0] <= lifted]
    else:
        back = back_n = None

    def right(v: job.JobVerdict) -> bool:
        if v.kind != expect:
            return False
        return rank is None or (
            v.straggler is not None and v.straggler.rank == rank and (not cause or v.cause == cause)
        )

    # a straggler's cause filled in once its node names one is no change of verdict
    changes = sum(
        1
        for a, b in itertools.pairwise(steady)
        if a[2].key != b[2].key and not (a[2].key[:2] == b[2].key[:2] and not a[2].cause)
    )
    minutes = len(steady) * INTERVAL_S / 60
    held: dict[str, int] = {}
    for p in steady:
        name = _words(p[2])
        held[name] = held.get(name, 0) + 1
    lo, hi = (steady[0][0], steady[-1][0]) if steady else (0.0, 0.0)
    others = [
        r.verdict.verdict
        for n, recs in run.nodes.items()
        if n != SLOW
        for r in recs
        if r.verdict and lo <= r.ts <= hi
    ]
    slow = [r.verdict.verdict for r in run.nodes[SLOW] if r.verdict and lo <= r.ts <= hi]
    return Score(
        steady=len(steady),
        right_share=sum(right(p[2]) for p in steady) / len(steady) if steady else 0.0,
        changes_per_min=changes / minutes if minutes else 0.0,
        held=held,
        others_waiting_share=others.count("waits for another rank") / len(others)
        if others
        else 0.0,
        others_compute_share=others.count("compute-bound") / len(others) if others else 0.0,
        slow_node_verdicts={v: slow.count(v) for v in sorted(set(slow))},
        node_verdicts={
            n: dict(
                Counter(
                    f"{r.verdict.verdict} ({r.verdict.cause})"
                    for r in recs
                    if r.verdict and lo <= r.ts <= hi
                )
            )
            for n, recs in run.nodes.items()
        },
        back_after_s=None if back is None or lifted is None else back - lifted,
        back_intervals=back_n,
        summary=steady[-1][2].summary if steady else "",
        # from the slow node's verdicts before the stretch that still vote for its cause
        timeline=_timeline(run, steady, lo - job.CAUSE_VOTES * INTERVAL_S, hi),
    )


def _words(v: job.JobVerdict) -> str:
    """A job verdict as the scores count it: "straggler rank 1 (disk)", "balanced"."""
    return v.kind + (f" rank {v.straggler.rank} ({v.cause})" if v.straggler else "")


def _timeline(run: Run, steady: list, lo: float, hi: float) -> list[str]:
    start = steady[0][0] if steady else 0.0
    job_lines = [f"{p[0] - start:+.1f} job {_words(p[1])} / held {_words(p[2])}" for p in steady]
    node_lines = [
        f"{r.ts - start:+.1f} {SLOW} {r.verdict.verdict} ({r.verdict.cause})"
        for r in run.nodes[SLOW]
        if r.verdict and lo <= r.ts <= hi
    ]
    return sorted(job_lines + node_lines, key=lambda line: float(line.split()[0]))
