"""Every bad setting stops the container before any service starts, with one line naming the
variable (NB_UID=0 among them: root as the user would undo every other guard); values that
used to break things now work: TRAIN_LOG_MAX_BYTES=50M, DISKINFO_PATHS with a space."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from tests.helpers import net

pytestmark = pytest.mark.image

BAD = [
    ({"NB_UID": "0"}, "NB_UID=0 is root"),
    ({"NB_UID": "00"}, "NB_UID=00 is root"),
    ({"NB_UID": "0x0"}, "NB_UID must be a whole number"),
    ({"NB_UID": "+0"}, "NB_UID must be a whole number"),
    ({"NB_UID": "1e3"}, "NB_UID must be a whole number"),
    ({"NB_USER": "bin"}, "NB_USER=bin names an existing system account"),
    ({"NB_USER": "root"}, "NB_USER=root names an existing system account"),
    ({"DISKINFO_INTERVAL": "0"}, "DISKINFO_INTERVAL must be a number of seconds above 0"),
    ({"DISKINFO_INTERVAL": "-1"}, "DISKINFO_INTERVAL must be a number of seconds above 0"),
    ({"DISKINFO_INTERVAL": "abc"}, "DISKINFO_INTERVAL must be a number of seconds above 0"),
    ({"METRICS_PORT": "99999"}, "METRICS_PORT must be a port from 1 to 65535"),
    ({"TRAIN_LOG_MAX_BYTES": "lots"}, "TRAIN_LOG_MAX_BYTES must be a size"),
    ({"DISKINFO_PATHS": "/workspace:data"}, "DISKINFO_PATHS entry 'data' is not absolute"),
    (
        {
            "JUPYTER_ENABLE": "1",
            "JUPYTER_ARGS": "--ServerApp.tornado_settings=disable_check_xsrf=1",
        },
        "JUPYTER_ARGS may not set --ServerApp.tornado_settings",
    ),
    ({"JUPYTER_ENABLE": "1", "JUPYTER_TOKEN": ""}, "JUPYTER_TOKEN is empty"),
    ({"PUBLIC_KEY": "ssh-ed25519 AAAA\nnot a key"}, "PUBLIC_KEY line 1 is not an SSH public key"),
    (
        {"JUPYTER_ENABLE": "1", "JUPYTER_ARGS": "--ServerApp.authenticate_prometheus=False"},
        "JUPYTER_ARGS may not set --ServerApp.authenticate_prometheus",
    ),
    ({"NB_GID": "0"}, "NB_GID=0 is the group root,"),
    ({"NB_GID": "42"}, "NB_GID=42 is the group shadow,"),
    ({"DISKINFO_PATHS": "/workspace\n/etc"}, "DISKINFO_PATHS holds a control character"),
    ({"LOG_DIR": "/etc"}, "LOG_DIR=/etc cannot be used: /etc is a system directory"),
    ({"LOG_DIR": "/var/log"}, "LOG_DIR=/var/log cannot be used: /var/log is a system directory"),
    ({"DISKINFO_STATE_DIR": "/run"}, "DISKINFO_STATE_DIR=/run cannot be used: /run is a system"),
]


@pytest.mark.parametrize(
    ("env", "line"), BAD, ids=[next(iter(e.items()))[1] or "empty" for e, _ in BAD]
)
def test_a_bad_setting_stops_the_start_with_one_line(container, env, line):
    running = container("echo", "training ran", env=env)
    assert running.wait(timeout=60) != 0
    logs = running.logs()
    errors = [x for x in logs.splitlines() if x.startswith("ERROR")]
    assert len(errors) == 1 and line in errors[0], logs[-2000:]
    # before any service: supervisord never ran, the training command never ran
    assert "spawned" not in logs and "training ran" not in logs


def test_a_fifo_as_token_file_is_refused_not_waited_on(container, tmp_path):
    os.mkfifo(tmp_path / "token")
    running = container(
        env={"JUPYTER_ENABLE": "1", "JUPYTER_TOKEN_FILE": "/secrets/token"},
        volumes={str(tmp_path): {"bind": "/secrets", "mode": "ro"}},
    )
    assert running.wait(timeout=60) != 0
    assert "JUPYTER_TOKEN_FILE=/secrets/token cannot be used: /secrets/token is a FIFO" in (
        running.logs()
    )


def test_sizes_with_units_and_paths_with_spaces_work(container, tmp_path):
    (tmp_path / "data").mkdir()
    running = container(
        "python3",
        "-c",
        "import time; print('x' * 100, flush=True); time.sleep(30)",
        env={
            "TRAIN_LOG_MAX_BYTES": "50M",
            "DISKINFO_PATHS": "/workspace/my data",
            "DISKINFO_INTERVAL": "1",
        },
        volumes={str(tmp_path / "data"): {"bind": "/workspace/my data", "mode": "rw"}},
    )
    net.wait_until(
        lambda: "x" * 100 in running.exec("cat /workspace/logs/train.log")[1],
        60,
        lambda: running.logs()[-2000:],
    )
    net.wait_until(
        lambda: (
            "watching /workspace/my data "
            in running.exec("cat /workspace/logs/diskinfo-monitor.log")[1]
        ),
        60,
        lambda: running.exec("cat /workspace/logs/diskinfo-monitor.log")[1],
    )
    assert running.supervisor_status().get("train") == "RUNNING"


@pytest.mark.parametrize(
    ("name", "path"), [("LOG_DIR", "/etc"), ("LOG_DIR", "/var/log"), ("DISKINFO_STATE_DIR", "/run")]
)
def test_a_system_directory_is_never_handed_to_jovyan(container, name, path):
    running = container(env={name: path})
    assert running.wait(timeout=60) != 0
    stream, _ = running.obj.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream)), mode="r|") as tar:
        top = tar.next()
    assert top is not None and (top.uid, top.gid) == (0, 0), (name, path, top and top.uid)


def test_a_directory_at_the_old_write_probe_name_does_not_stop_the_start(container):
    running = container("sleep", "600")
    running.wait_for_program("diskinfo", timeout=60)
    code, out = running.exec("mkdir -p /workspace/logs/.write-test/x", user="jovyan")
    assert code == 0, out
    running.obj.restart(timeout=10)
    running.wait_for_program("train", timeout=60)
    assert running.exec("ls /workspace/logs/.write-test")[1].split() == ["x"]
