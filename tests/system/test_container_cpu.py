"""A CPU hog in another cgroup never changes this container's verdict; the same hog in its own
cgroup does. Two real cgroup-v1 groups (cpu, cpuacct, blkio) stand in for two containers: the
monitor runs in one, a busy loop on every core in the other, on this shared machine."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.cgroups import HOG, available, enter, group

pytestmark = [pytest.mark.system, pytest.mark.slow]


@contextlib.contextmanager
def hog_in(dirs: dict[str, Path]) -> Iterator[None]:
    proc = subprocess.Popen(
        ["sh", "-c", enter(dirs) + f'exec {sys.executable} -c "$HOG"'],
        env={**os.environ, "HOG": HOG},
        start_new_session=True,
    )
    try:
        time.sleep(1.0)
        yield
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def watch_in(dirs: dict[str, Path], tmp: Path, name: str, count: int = 6) -> list[dict]:
    logs, data = tmp / name, tmp / "data"
    data.mkdir(exist_ok=True)
    cmd = f"exec {sys.executable} -m diskinfo.cli watch {data} --interval 1 --count {count} "
    subprocess.run(
        ["sh", "-c", enter(dirs) + cmd + f"--log-dir {logs} --echo never"],
        check=True,
        timeout=60,
        env={**os.environ, "DISKINFO_STATE_DIR": str(tmp / "state")},
    )
    return [json.loads(line) for line in (logs / "diskinfo.jsonl").read_text().splitlines()]


@pytest.fixture
def two_groups():
    if not available():
        pytest.skip("needs root and cgroup v1 cpu, cpuacct and blkio hierarchies")
    tag = f"diskinfo-test-{os.getpid()}"
    with group(f"{tag}-mine") as mine, group(f"{tag}-other") as other:
        yield mine, other


def test_another_groups_cpu_hog_never_changes_this_groups_verdict(two_groups, tmp_path):
    mine, other = two_groups
    with hog_in(other):
        records = watch_in(mine, tmp_path, "hog-elsewhere")
    steady = records[1:]  # the first interval has no previous cgroup reading
    print([(r["cpu"]["cpu_busy"], r["cpu"]["cgroup_cpu_busy"]) for r in steady])
    assert all(r["cpu"]["cgroup_path"].endswith("-mine") for r in steady)
    assert max(r["cpu"]["cpu_busy"] for r in steady) >= 80  # the host is saturated
    assert all(r["cpu"]["cgroup_cpu_busy"] < 30 for r in steady)  # this group is not
    assert {r["verdict"]["verdict"] for r in steady} == {"idle"}
    assert {r["verdict"]["cause"] for r in steady} == {"no-training"}
    assert not any("wrap" in r["verdict"]["summary"] for r in steady)


def test_the_same_hog_in_this_group_changes_it_and_a_quota_is_read(two_groups, tmp_path):
    mine, _other = two_groups
    (mine["cpu"] / "cpu.cfs_quota_us").write_text("150000")  # 1.5 cores
    with hog_in(mine):
        records = watch_in(mine, tmp_path, "hog-here")
    steady = records[1:]
    print([(r["cpu"]["cgroup_cpu_cores"], r["cpu"]["cgroup_cpu_busy"]) for r in steady])
    assert all(r["cpu"]["cgroup_cpu_quota"] == 1.5 for r in steady)
    assert all(r["cpu"]["cgroup_cpu_allowed"] == min(1.5, os.cpu_count()) for r in steady)
    # its own busy loops show as its own load (the shared machine's other work may keep them
    # under the quota, so not always at it); periods and throttling are read
    assert all(r["cpu"]["cgroup_cpu_busy"] >= 50 for r in steady)
    assert all(r["cpu"]["cgroup_cpu_throttled"] is not None for r in steady)
    assert {r["verdict"]["interval_verdict"] for r in steady[1:]} == {"unknown"}
    assert "this container's disk or CPU works" in steady[-1]["verdict"]["summary"]
