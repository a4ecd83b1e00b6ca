"""User hooks in /etc/pytorch-cuda/startup.d/ and /workspace/.startup.d/: run in order before
the services, each logged; a failing one is reported and the container starts anyway."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

pytestmark = pytest.mark.image


def _hook(directory: Path, name: str, body: str, executable: bool = True) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def test_hooks_run_in_order_before_services_and_a_failure_does_not_stop_the_start(
    container, tmp_path
):
    system, project, logs = tmp_path / "system", tmp_path / "project", tmp_path / "logs"
    for d in (system, project, logs):
        d.mkdir()
    order = "/workspace/logs/hooks.order"
    # supervisord writes its pid file when it starts: absent means no service runs yet
    before = "test -e /run/pytorch-cuda/supervisord.pid && echo late || echo early"
    # root's hook creates the file; the project's hooks (as NB_USER) append to it
    _hook(
        system,
        "10-system",
        f'echo "system as $(id -un) $({before})" >>{order}; chmod a+w {order}',
    )
    _hook(
        project,
        "10-first",
        f'echo "first as $(id -un) $({before})" >>{order}; echo "hello from first"',
    )
    _hook(project, "20-broken", 'echo "about to fail" >&2; exit 3')
    _hook(project, "30-after", f'echo "after $({before})" >>{order}')
    _hook(project, "40-not-executable", f"echo never >>{order}", executable=False)
    running = container(
        "cat",
        order,
        volumes={
            str(system): {"bind": "/etc/pytorch-cuda/startup.d", "mode": "ro"},
            str(project): {"bind": "/workspace/.startup.d", "mode": "ro"},
            str(logs): {"bind": "/workspace/logs", "mode": "rw"},
        },
    )
    assert running.wait(timeout=90) == 0, running.logs()[-3000:]
    assert (logs / "hooks.order").read_text().splitlines() == [
        "system as root early",
        # the project's hooks are writable by NB_USER, so they never run as root
        "first as jovyan early",
        "after early",
    ]
    startup = (logs / "startup.log").read_text()
    assert "startup hook /workspace/.startup.d/10-first: ok" in startup
    assert "10-first: hello from first" in startup
    assert "20-broken: about to fail" in startup
    failure = [line for line in startup.splitlines() if "20-broken: FAILED" in line]
    assert failure and failure[0].startswith("ERROR") and "exit status 3" in failure[0]
    assert "40-not-executable: skipped, not executable" in startup
    # the same lines reach docker logs, and the training command still ran
    logs_text = running.logs()
    assert "20-broken: FAILED with exit status 3" in logs_text
    assert "after early" in logs_text


def test_a_hanging_hook_is_stopped_and_the_container_still_starts(container, tmp_path):
    project, logs = tmp_path / "project", tmp_path / "logs"
    project.mkdir()
    logs.mkdir()
    _hook(project, "10-hangs", "sleep 600")
    running = container(
        "echo",
        "training ran",
        env={"STARTUP_HOOK_TIMEOUT": "2"},
        volumes={
            str(project): {"bind": "/workspace/.startup.d", "mode": "ro"},
            str(logs): {"bind": "/workspace/logs", "mode": "rw"},
        },
    )
    assert running.wait(timeout=90) == 0, running.logs()[-3000:]
    startup = (logs / "startup.log").read_text()
    stopped = [line for line in startup.splitlines() if "10-hangs: stopped after 2 s" in line]
    assert stopped and stopped[0].startswith("ERROR"), startup[-2000:]
    assert "training ran" in running.logs()
