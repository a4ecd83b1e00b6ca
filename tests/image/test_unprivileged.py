"""The image as an ordinary user and on a read-only root, in Docker: `--user`, `--read-only`
(what HPC runtimes do to every container), a uid without a passwd entry. The command runs beside
the monitor through `diskinfo run`; the verdicts, the JSONL and the [Run] line land in the
user's logs folder, the command's exit code is the container's, and what is off without root
is one line."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.helpers import training

pytestmark = pytest.mark.image

# A small CPU training through the README's DataLoader wrapper, a few of the monitor's 1 s
# intervals long; exits with its first argument.
TRAIN_PY = training.train_py(6)
FAST = {"DISKINFO_INTERVAL": "1"}
UNPRIVILEGED = "without root: sshd needs root and is not started"


def project(tmp_path: Path, uid: int = 1000, gid: int = 100) -> Path:
    """The user's folder, owned by them, with train.py: bound at /workspace/code."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text(TRAIN_PY)
    os.chown(code, uid, gid)
    return code


def records(logs: Path) -> list[dict]:
    return [json.loads(line) for line in (logs / "diskinfo.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("code", [0, 3])
def test_user_1000_trains_beside_the_monitor_and_keeps_the_exit_code(container, tmp_path, code):
    folder = project(tmp_path)
    running = container(
        "python", "train.py", str(code),
        user="1000:100", working_dir="/workspace/code", env=FAST,
        volumes={str(folder): {"bind": "/workspace/code"}},
    )  # fmt: skip
    assert running.wait(timeout=180) == code, running.logs()[-3000:]
    logs = running.logs()
    assert logs.count(UNPRIVILEGED) == 1, logs[-3000:]
    assert "must start as root" not in logs and "Traceback" not in logs, logs[-3000:]
    assert "train.py: " in logs and "==== pytorch-cuda-diskinfo" in logs, logs[-3000:]
    assert "Services" not in logs and "supervisord" not in logs, logs[-3000:]  # none here
    assert "[Verdict]" in logs, logs[-3000:]
    run = [line for line in logs.splitlines() if "Z [Run] " in line]
    assert len(run) == 1, logs[-3000:]
    if code:
        assert f"the training command failed: exit status {code}" in run[0], run[0]
    # the logs folder is the working folder's logs/, the user's
    out = folder / "logs"
    assert out.stat().st_uid == 1000
    assert {"train.log", "diskinfo.log", "diskinfo.jsonl", "diskinfo-monitor.log"} <= {
        p.name for p in out.iterdir()
    }
    assert all(p.stat().st_uid == 1000 for p in out.iterdir())
    assert "train.py: " in (out / "train.log").read_text()
    recs = records(out)
    assert recs and any(r.get("loader") for r in recs), recs[-1]


def test_sigterm_ends_the_command_and_still_writes_the_run_line(container, tmp_path):
    """`docker stop` (as scancel or a time limit): the command's group gets SIGTERM, the
    monitor then writes [Run], the container ends with the command's status."""
    folder = project(tmp_path)
    running = container(
        "bash", "-c", "echo started; sleep 600",
        user="1000:100", working_dir="/workspace/code", env=FAST,
        volumes={str(folder): {"bind": "/workspace/code"}},
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while "started" not in running.logs() and time.monotonic() < deadline:
        time.sleep(0.5)
    # Docker's HEALTHCHECK, run as the container's user: the monitor's heartbeat, no services
    deadline = time.monotonic() + 40
    while running.health() != "healthy" and time.monotonic() < deadline:
        time.sleep(1)
    assert running.health() == "healthy", running.reload().obj.attrs["State"]["Health"]
    running.obj.stop(timeout=20)
    assert running.wait(timeout=30) == 143, running.logs()[-3000:]
    logs = running.logs()
    assert "SIGTERM: stopping the command" in logs, logs[-3000:]
    assert [line for line in logs.splitlines() if "Z [Run] " in line], logs[-3000:]
    assert "[Run]" in (folder / "logs" / "diskinfo.log").read_text()


def test_read_only_root_runs_as_the_image_user(container, tmp_path):
    """`docker run --read-only --tmpfs /tmp --tmpfs /run`, started as root: nothing of the
    root start can be prepared, so it says so and runs the command as NB_UID; HOME and the
    caches go to /tmp; nothing is written in the image."""
    folder = project(tmp_path)
    running = container(
        "python", "train.py", "0",
        working_dir="/workspace/code", env=FAST, read_only=True,
        tmpfs={"/tmp": "", "/run": ""},
        volumes={str(folder): {"bind": "/workspace/code"}},
    )  # fmt: skip
    assert running.wait(timeout=180) == 0, running.logs()[-3000:]
    logs = running.logs()
    assert "root filesystem is read-only" in logs, logs[-3000:]
    assert logs.count(UNPRIVILEGED) == 1, logs[-3000:]
    assert "HOME=/home/jovyan cannot be written" in logs, logs[-3000:]
    assert "Read-only file system" not in logs.replace("(Read-only file system)", ""), logs
    assert "Traceback" not in logs and "[Run]" in logs, logs[-3000:]
    assert (folder / "logs" / "diskinfo.jsonl").stat().st_uid == 1000
    # nothing written in the image but the mount point Docker made for the bind
    changes = [c["Path"] for c in running.obj.diff() or []]
    assert set(changes) <= {"/workspace", "/workspace/code"}, changes


def test_unknown_uid_and_unwritable_logs_are_one_line_each_and_the_command_runs(container):
    """`--user 4242` (no passwd entry; /workspace is uid 1000's): one line for the name, one
    for HOME, one for the logs folder, each naming the fix; the command still runs and its
    exit code is the container's."""
    running = container(
        "python", "-c", "import getpass, sys; print('user', getpass.getuser()); sys.exit(5)",
        user="4242", env=FAST,
    )  # fmt: skip
    assert running.wait(timeout=120) == 5, running.logs()[-3000:]
    logs = running.logs()
    assert "user uid4242" in logs, logs[-3000:]
    lines = logs.splitlines()
    for marker, fix in (
        ("uid 4242 has no entry in the image's /etc/passwd", "--user 1000:100"),
        ("HOME=/ ", "set HOME") if "HOME=/ " in logs else ("HOME is /", "set HOME"),
        ("the logs folder /workspace/logs cannot be used", "--log-dir DIR"),
    ):
        found = [line for line in lines if marker in line]
        assert len(found) == 1 and fix in found[0], (marker, logs[-3000:])
    assert "Traceback" not in logs, logs[-3000:]


def test_jupyter_lab_as_the_command_without_root(container, tmp_path, jupyter_ready):
    """`docker run --user 1000:100 IMAGE jupyter lab`: the user's own server, behind a token
    (random, in the URL on the console), on JUPYTER_PORT, serving the working folder."""
    import requests

    folder = project(tmp_path)
    running = container(
        "jupyter", "lab", user="1000:100", working_dir="/workspace/code",
        volumes={str(folder): {"bind": "/workspace/code"}},
    )  # fmt: skip
    port = running.ports["JUPYTER_PORT"]

    def url() -> str | None:
        for line in running.logs().splitlines():
            if f"JupyterLab on port {port} serving /workspace/code: " in line:
                return line.rsplit(": ", 1)[1]
        return None

    from tests.helpers.net import wait_until

    link = wait_until(url, 60, lambda: running.logs()[-3000:])
    token = link.split("token=", 1)[1]
    assert len(token) == 48, link

    def answers() -> bool:
        try:
            r = requests.get(f"http://127.0.0.1:{port}/api/contents", params={"token": token},
                             timeout=3)  # fmt: skip
        except requests.ConnectionError:
            return False
        return r.status_code == 200 and "train.py" in r.text

    wait_until(answers, 90, lambda: running.logs()[-3000:])
    refused = requests.get(f"http://127.0.0.1:{port}/api/contents", timeout=3)
    assert refused.status_code == 403
    assert running.logs().count(UNPRIVILEGED) == 1
