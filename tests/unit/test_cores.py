"""diskinfo.cores: the one definition of the cores a container may use (quota, cpuset,
host), which the monitor, `diskinfo tune` and validate-cuda share (the image test
test_cores.py checks all three under --cpus)."""

from __future__ import annotations

import os

import pytest

from diskinfo import cores
from diskinfo.tune import grid


@pytest.mark.parametrize(
    ("quota", "cpuset", "host", "allowed"),
    [(None, 4, 16, 4.0), (1.5, 4, 16, 1.5), (8.0, 4, 16, 4.0), (None, 0, 16, 16.0)],
)
def test_the_least_of_quota_cpuset_and_host(quota, cpuset, host, allowed):
    assert cores.allowed_cores(quota, cpuset, host) == allowed


def test_tune_climbs_to_the_quota_not_the_cpuset(monkeypatch):
    monkeypatch.setattr(cores, "own_cpu_location", lambda: object())
    monkeypatch.setattr(cores, "read_quota", lambda where: 1.5)  # docker run --cpus=1.5
    assert cores.available() == min(1.5, len(os.sched_getaffinity(0)))
    assert grid.cores() == 1 and grid.ladder(grid.cores()) == [0, 1]


def test_a_quota_under_one_core_still_runs_one_worker():
    assert cores.whole(0.5) == 1 and cores.whole(2.9) == 2
