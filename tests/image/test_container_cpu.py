"""Two real containers: a CPU hog in one never changes the other's verdict.

The image's monitor (supervisord, unprivileged, no training command) judges its container by
the container's own cgroup CPU; a second container spins on every core of the host. The
monitor's records must show the host saturated, its own container quiet, and the held
verdict `idle` (cause `no-training`) throughout. Then the same load inside the monitor's own
container: its cgroup figure rises and the interval's decision is no longer `idle`.
"""

from __future__ import annotations

import json
import os
import time

import pytest

pytestmark = pytest.mark.image

HOG = "for i in $(seq $(nproc)); do yes > /dev/null & done; wait"


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_another_containers_cpu_hog_never_changes_this_containers_verdict(
    container, docker_client, image, tmp_path, wait_until
):
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chmod(logs, 0o777)  # the monitor runs as the unprivileged user
    running = container(
        env={"DISKINFO_INTERVAL": "1"},
        volumes={str(logs): {"bind": "/workspace/logs", "mode": "rw"}},
    )
    jsonl = logs / "diskinfo.jsonl"
    wait_until(
        lambda: jsonl.exists() and jsonl.read_text().count("\n") >= 8,
        120,
        lambda: f"no records from the monitor; logs:\n{running.logs()[-3000:]}",
    )
    # no training command: its empty PID file is no fault to warn of (it was, in docker logs)
    assert not [w for r in _records(jsonl) for w in r["warnings"] if w.startswith("procs")]
    assert "PID file" not in running.logs()
    hog = docker_client.containers.run(
        image, ["-c", HOG], entrypoint=["sh"], detach=True, network_mode="host"
    )
    try:
        start = time.time()
        wait_until(lambda: len([r for r in _records(jsonl) if r["ts"] > start + 2]) >= 8, 60, "")
        with_hog = [r for r in _records(jsonl) if r["ts"] > start + 2]
    finally:
        hog.remove(force=True)
    figures = [(r["cpu"]["cpu_busy"], r["cpu"]["cgroup_cpu_busy"]) for r in with_hog]
    print("host %, container %:", [(round(a), round(b or 0)) for a, b in figures])
    assert all(r["cpu"]["cgroup_path"] not in (None, "/") for r in with_hog)
    assert sum(a >= 80 for a, _ in figures) >= len(figures) - 1  # the host is saturated
    assert all(b is not None and b < 30 for _, b in figures)  # this container is not
    assert {r["verdict"]["verdict"] for r in with_hog} == {"idle"}
    assert {r["verdict"]["cause"] for r in with_hog} == {"no-training"}

    # the control: the same load in this container is this container's, and shows
    start = time.time()
    code, out = running.exec(f"timeout 6 sh -c '{HOG}'", timeout=30)
    assert code in (0, 124), out
    wait_until(lambda: len([r for r in _records(jsonl) if r["ts"] > start]) >= 7, 30, "")
    own = [r for r in _records(jsonl) if start + 1 < r["ts"] < start + 6]
    print("own load, container %:", [round(r["cpu"]["cgroup_cpu_busy"] or 0) for r in own])
    assert max(r["cpu"]["cgroup_cpu_busy"] for r in own) >= 60
    assert any(r["verdict"]["interval_verdict"] != "idle" for r in own)
