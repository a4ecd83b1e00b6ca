"""The job's verdict across nodes on real engines: a data-parallel training started by `srun -N3`
on the three-node Slurm of test_slurm_cluster (slurmctld and three slurmd on 127.0.0.2-4),
torch.distributed with gloo on CPU, one rank per node, each node reading its own data device
under its own `diskinfo watch` into its folder of one shared logs folder
(tests/helpers/slurm_job.py). Scored like the verdict matrix, on the held job verdict that
`diskinfo report` over the logs folder reads: share of steady intervals right, changes per
minute. benchmarks/bench_job_verdict.py runs the same scenarios longer and writes
benchmarks/results/job_verdict.md.
"""

from __future__ import annotations

import os

import pytest

from diskinfo.analyse import job
from tests.helpers.slurm_job import SLOW, run_job, score
from tests.system.test_slurm_cluster import pytestmark as cluster_marks

pytestmark = [
    *cluster_marks,
    pytest.mark.skipif(
        not os.path.isdir("/sys/fs/cgroup/cpu"), reason="needs cgroup v1 cpu for the CPU quota"
    ),
]
pytest.importorskip("torch")

SECONDS = 24.0  # of training per scenario: about 45 s each with start-up and teardown
SLOW_RANK = 1  # srun gives dinode2 the second task


def test_balanced_warm_data_has_no_straggler():
    s = score(run_job("balanced", SECONDS), job.BALANCED)
    print(s)
    assert s.steady >= 10 and s.right_share >= 0.9 and s.changes_per_min <= 1, s
    assert s.others_waiting_share <= 0.1, s  # nobody waits for a rank that does not lag


def test_a_capped_data_device_names_its_rank_cause_disk():
    s = score(run_job("disk", SECONDS), job.STRAGGLER, SLOW_RANK, "disk")
    print(s)
    assert s.steady >= 10 and s.right_share >= 0.9 and s.changes_per_min <= 1, s
    assert f"rank {SLOW_RANK} on {SLOW}" in s.summary and "r_await" in s.summary, s
    # the other nodes' own verdicts: they wait for another rank, not compute-bound
    assert s.others_waiting_share >= 0.8 and s.others_compute_share <= 0.1, s


def test_starved_loader_workers_name_their_rank_cause_cpu():
    s = score(run_job("cpu", SECONDS), job.STRAGGLER, SLOW_RANK, "cpu")
    print(s)
    assert s.steady >= 10 and s.right_share >= 0.9 and s.changes_per_min <= 1, s


def test_the_straggler_fixed_mid_run_is_balanced_within_three_intervals():
    # the lift after the warm-up and 10 steady intervals, then as long again
    run = run_job("fixed", SECONDS + 8, lift_after=16)
    s = score(run, job.STRAGGLER, SLOW_RANK, "disk")
    print(s)
    assert s.right_share >= 0.9, s
    assert s.back_intervals is not None and s.back_intervals <= 3, s
