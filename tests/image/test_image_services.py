"""JupyterLab, SSH, logs, ownership and the health check in one long-lived container, as a user
would run it: a key, a token left to the image, logs and data bind-mounted, a host uid."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.image

HOST_UID, HOST_GID = 4321, 4322  # a host user the image does not know
TRAIN = "echo training; echo model > /workspace/data/checkpoint.pt; sleep 600"


@pytest.fixture(scope="module")
def mounts(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("session")
    dirs = {"logs": root / "logs", "data": root / "data"}
    for d in dirs.values():
        d.mkdir()
        os.chown(d, HOST_UID, HOST_GID)  # as a host user's directories would be
    return dirs


@pytest.fixture(scope="module")
def session(module_container, mounts, ssh_key):
    return module_container(
        "bash",
        "-c",
        TRAIN,
        env={
            "JUPYTER_ENABLE": "1",
            "PUBLIC_KEY": ssh_key.public,
            "NB_UID": str(HOST_UID),
            "NB_GID": str(HOST_GID),
            "DISKINFO_INTERVAL": "1",
        },
        volumes={
            str(mounts["logs"]): {"bind": "/workspace/logs"},
            str(mounts["data"]): {"bind": "/workspace/data"},
        },
    )


@pytest.fixture(scope="module")
def token(session, jupyter_ready) -> str:
    return jupyter_ready(session)


# --- JupyterLab ----------------------------------------------------------------------------


def test_jupyter_answers_with_the_token_and_refuses_without(session, token):
    import requests

    url = f"http://127.0.0.1:{session.ports['JUPYTER_PORT']}/api/status"
    assert requests.get(url, params={"token": token}, timeout=5).status_code == 200
    assert requests.get(url, headers={"Authorization": f"token {token}"}, timeout=5).ok
    assert requests.get(url, timeout=5).status_code == 403
    assert requests.get(url, params={"token": token[:-1] + "x"}, timeout=5).status_code == 403


def test_random_token_is_printed_once_to_the_jupyter_log(session, token, mounts):
    assert mounts["logs"].joinpath("jupyter.log").read_text().count(token) == 1
    # docker logs carries it once, in the banner's openable URL (a user copies it from
    # there), nowhere else
    in_logs = [line for line in session.logs().splitlines() if token in line]
    assert len(in_logs) == 1 and in_logs[0].startswith("Jupyter    http://127.0.0.1:"), in_logs
    train_env = f"/proc/{session.supervisor_pid('train')}/environ"
    code, env = session.exec(["cat", train_env], user=str(HOST_UID))  # root lacks CAP_SYS_PTRACE
    assert code == 0 and token not in env, "the token is in the training command's environment"


def test_jupyter_serves_workspace_on_all_addresses_as_nb_user(session, token):
    pid = session.supervisor_pid("jupyter")
    _, out = session.exec(["stat", "-c", "%u", f"/proc/{pid}"])
    assert out.strip() == str(HOST_UID)
    _, out = session.exec(["jupyter", "server", "list", "--json"], user=str(HOST_UID))
    info = json.loads(out.strip().splitlines()[-1])
    assert info["root_dir"] == "/workspace"
    assert info["hostname"] == "0.0.0.0"
    assert info["port"] == session.ports["JUPYTER_PORT"]


# --- SSH -----------------------------------------------------------------------------------


def test_ssh_login_with_the_key_works(session, ssh_key, ssh_client, ssh_run):
    client = ssh_client(session, ssh_key.key)
    status, out = ssh_run(client, "id -u; whoami")
    assert status == 0
    assert out.split() == [str(HOST_UID), "jovyan"]


def test_ssh_refuses_password_and_root(session, ssh_key, ssh_client):
    import paramiko

    ssh_client(session, ssh_key.key).close()  # sshd is up
    with pytest.raises(paramiko.AuthenticationException):
        ssh_client(session, None, password="jovyan", retry=False)
    # Even with the key in root's authorized_keys, root may not log in.
    code, out = session.exec(
        f"mkdir -p /root/.ssh && echo '{ssh_key.public}' > /root/.ssh/authorized_keys"
    )
    assert code == 0, out
    with pytest.raises(paramiko.AuthenticationException):
        ssh_client(session, ssh_key.key, user="root", retry=False)


def test_host_keys_are_per_container(session, container, ssh_key, ssh_client):
    other = container("sleep", "60", env={"PUBLIC_KEY": ssh_key.public})
    keys = [
        ssh_client(c, ssh_key.key).get_transport().get_remote_server_key().get_base64()
        for c in (session, other)
    ]
    assert keys[0] != keys[1]


def test_mounted_authorized_keys_and_a_renamed_user(
    container, ssh_key, ssh_client, ssh_run, tmp_path
):
    keys = tmp_path / "authorized_keys"
    keys.write_text(ssh_key.public + "\n")
    os.chown(keys, HOST_UID, HOST_GID)  # a host user's file: sshd must still accept it
    keys.chmod(0o600)
    running = container(
        "sleep",
        "60",
        env={"NB_USER": "alice"},
        volumes={str(keys): {"bind": "/etc/pytorch-cuda/authorized_keys", "mode": "ro"}},
    )
    client = ssh_client(running, ssh_key.key, user="alice")
    status, out = ssh_run(client, "whoami; echo $HOME; id -u")
    assert status == 0
    assert out.split() == ["alice", "/home/alice", "1000"]


def test_without_a_key_sshd_is_off_and_the_log_says_how(container, tmp_path, wait_until):
    running = container("sleep", "60", volumes={str(tmp_path): {"bind": "/workspace/logs"}})
    running.wait_for_program("diskinfo")
    assert running.supervisor_status()["sshd"] == "STOPPED"
    assert running.supervisor_status()["jupyter"] == "STOPPED"  # JUPYTER_ENABLE=0
    assert "PUBLIC_KEY" in tmp_path.joinpath("sshd.log").read_text()
    assert "PUBLIC_KEY" in running.logs()


# --- logs, ownership, health ---------------------------------------------------------------


def test_every_program_logs_under_the_mounted_logs_dir(
    session, token, mounts, ssh_key, ssh_client, wait_until
):
    ssh_client(session, ssh_key.key).close()  # sshd logged a login
    logs = mounts["logs"]
    wait_until(lambda: (logs / "diskinfo.log").exists(), 30, "the monitor wrote no diskinfo.log")
    expected = {
        "supervisord.log": "spawned: 'train'",
        "jupyter.log": "Jupyter",
        "sshd.log": "Accepted publickey",
        "train.log": "training",
        "startup.log": "services run as",
        "diskinfo.log": "",  # written by diskinfo watch itself
    }
    for name, marker in expected.items():
        path = logs / name
        assert path.is_file(), f"{name} missing; have {sorted(p.name for p in logs.iterdir())}"
        assert marker in path.read_text(), f"{name} lacks {marker!r}"
    # the monitor's console (start line, verdicts, errors) is docker logs, not a file
    assert "diskinfo: watching " in session.logs()


def test_files_on_bind_mounts_belong_to_nb_uid(session, token, mounts, wait_until):
    wait_until(lambda: mounts["data"].joinpath("checkpoint.pt").exists(), 30, "no checkpoint")
    for path in [mounts["data"] / "checkpoint.pt", *mounts["logs"].iterdir()]:
        st = path.stat()
        assert (st.st_uid, st.st_gid) == (HOST_UID, HOST_GID), f"{path.name}: {st.st_uid}"


def test_health_check_turns_healthy(session, token, wait_until):
    wait_until(lambda: session.health() == "healthy", 60, lambda: f"health: {session.health()}")


def test_health_check_fails_when_a_service_is_down(container, wait_until):
    running = container("sleep", "120")
    wait_until(lambda: running.health() == "healthy", 60, "never healthy")
    code, out = running.exec(
        ["supervisorctl", "-c", "/etc/pytorch-cuda/supervisord.conf", "stop", "diskinfo"]
    )
    assert code == 0, out
    code, out = running.exec(["/usr/local/lib/pytorch-cuda/run/healthcheck.sh"])
    assert code == 1 and "diskinfo" in out
