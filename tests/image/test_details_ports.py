"""Ports another program holds (`--network host`: the host's sshd, a second container): the
services that need them are left off with one clear line each, the banner says how to move
them, nothing crash-loops, the container is healthy, and the suggested port works."""

from __future__ import annotations

import re
import socket
import time

import pytest

pytestmark = pytest.mark.image

TRAIN = ("python3", "-c", "import time; time.sleep(300)")


def _listen() -> socket.socket:
    sock = socket.socket()
    sock.bind(("0.0.0.0", 0))
    sock.listen()
    return sock


def test_taken_ports_leave_their_services_off_with_the_setting_to_move_them(
    container, ssh_key, jupyter_ready, wait_until
):
    held = {name: _listen() for name in ("JUPYTER_PORT", "SSH_PORT", "METRICS_PORT")}
    port = {name: sock.getsockname()[1] for name, sock in held.items()}
    try:
        running = container(
            *TRAIN,
            env={"JUPYTER_ENABLE": "1", "PUBLIC_KEY": ssh_key.public}
            | {name: str(number) for name, number in port.items()},
        )
        running.wait_for_program("train")
        running.wait_for_program("diskinfo")
        logs = running.logs()
        for name, service in (
            ("JUPYTER_PORT", "jupyter"),
            ("SSH_PORT", "sshd"),
            ("METRICS_PORT", "diskinfo's metrics endpoint"),
        ):
            line = f"{service} not started: port {port[name]} is already in use here"
            assert line in logs, logs[-3000:]
            assert re.search(rf"{re.escape(line)}.*-e {name}=\d+\n", logs), logs[-3000:]
        start = logs.index("==== pytorch-cuda-diskinfo")
        banner = logs[start : start + 2500]
        assert f"Jupyter    off: port {port['JUPYTER_PORT']} is already in use" in banner
        assert f"SSH        off: port {port['SSH_PORT']} is already in use" in banner
        assert f"Metrics    off: port {port['METRICS_PORT']} is already in use" in banner
        assert "Services   diskinfo (no metrics), train (your command)" in banner
        assert "cannot serve metrics" not in logs  # the monitor was started without them
        # left off, not restarted: after several of supervisord's retry periods still STOPPED
        time.sleep(12)
        status = running.supervisor_status()
        assert status.get("jupyter") == "STOPPED" and status.get("sshd") == "STOPPED", status
        assert status.get("diskinfo") == "RUNNING" and status.get("train") == "RUNNING", status
        jupyter_log = running.read_file("/workspace/logs/jupyter.log")
        assert f"jupyter not started: port {port['JUPYTER_PORT']}" in jupyter_log
        assert "Traceback" not in jupyter_log and "Errno" not in jupyter_log
        wait_until(lambda: running.health() == "healthy", 90, lambda: running.health())
        # the user does what the line says, the other program still holding its ports:
        # Jupyter starts on the suggested port
        suggested = int(re.search(r"jupyter not started: .*-e JUPYTER_PORT=(\d+)", logs)[1])
        moved = container(*TRAIN, env={"JUPYTER_ENABLE": "1", "JUPYTER_PORT": str(suggested)})
        moved.ports["JUPYTER_PORT"] = suggested
        jupyter_ready(moved)
        assert "jupyter not started" not in moved.logs()
    finally:
        for sock in held.values():
            sock.close()
