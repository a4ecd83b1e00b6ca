"""The start banner, in `docker logs` and in /workspace/logs/startup.log."""

from __future__ import annotations

import re
import socket

import pytest

pytestmark = pytest.mark.image


def test_banner_says_versions_gpus_shm_services_token_and_logs(container, ssh_key, tmp_path):
    logs_dir = tmp_path / "logs"
    logs_dir.mkdir()
    running = container(
        "true",
        env={"JUPYTER_ENABLE": "1", "PUBLIC_KEY": ssh_key.public},
        shm_size="1g",
        volumes={str(logs_dir): {"bind": "/workspace/logs", "mode": "rw"}},
    )
    assert running.wait(timeout=120) == 0, running.logs()[-3000:]
    logs = running.logs()
    start = logs.index("==== pytorch-cuda-diskinfo")
    banner = logs[start : start + 2000]
    ports = running.ports
    assert re.search(r"^Python +3\.\d+\.\d+", banner, re.M), banner
    assert re.search(r"^torch +2\.\d+\.\d+", banner, re.M), banner
    assert re.search(r"^CUDA .*cuDNN .*NCCL ", banner, re.M), banner
    assert "no GPU visible: did you pass --gpus all?" in banner
    assert "/dev/shm   1024 MB" in banner
    assert f"jupyter (port {ports['JUPYTER_PORT']})" in banner
    assert f"Jupyter    http://127.0.0.1:{ports['JUPYTER_PORT']}/lab?token=" in banner
    # --network host (our tests' only network): the port and the host's name are known
    assert f"SSH        ssh -p {ports['SSH_PORT']} jovyan@{socket.gethostname()}" in banner
    assert f"sshd (port {ports['SSH_PORT']})" in banner
    assert f"metrics on port {ports['METRICS_PORT']}" in banner
    assert (
        "Jupyter token: random, in the URL above and printed once in /workspace/logs/jupyter.log"
        in banner
    )
    assert "Logs       /workspace/logs/" in banner
    startup_log = (logs_dir / "startup.log").read_text()
    assert banner.splitlines()[0] in startup_log
    assert "no GPU visible: did you pass --gpus all?" in startup_log
    # the banner comes before any service starts
    assert logs.index("==== pytorch-cuda-diskinfo") < logs.index("supervisord started")
