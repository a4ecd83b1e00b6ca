"""The banner's access lines: an openable Jupyter URL, the ssh command, the port caveat once,
and the baseline hint; and supervisord's config with socket credentials (no CRIT at start)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.helpers.scripts import DOCKER, load

ETC = DOCKER / "etc"


places = load("start/places.py")  # banner.py imports its neighbour by bare name
banner = load("start/banner.py")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "STARTUP_STATE_DIR": str(tmp_path),
        "LOG_DIR": str(tmp_path / "logs"),
        "JUPYTER_PORT": "8888",
        "SSHD_ENABLE": "1",
        "NB_USER": "jovyan",
        # the rest of what the Dockerfile sets as ENV, which the banner reads
        "IMAGE_CUDA": "11.8",
        "JUPYTER_ENABLE": "1",
        "SSH_PORT": "22",
        "METRICS_PORT": "9101",
    }
    env.update(extra)
    return env


def _text(env: dict[str, str], net_devices: tuple[str, ...] = ("lo", "eth0")) -> str:
    """The banner of a container on its own network (Docker's default), unless told."""
    return "\n".join(banner.render(banner.gather(env, list(net_devices))))


def test_random_token_gives_an_openable_url_ssh_line_and_one_port_caveat(tmp_path):
    (tmp_path / "jupyter-token").write_text("0123abcd")
    text = _text(_env(tmp_path))
    assert "Jupyter    http://127.0.0.1:8888/lab?token=0123abcd" in text
    assert "SSH        ssh -p PORT jovyan@HOST" in text
    assert text.count("host ports you published") == 1
    assert "0.0.0.0" not in text


def test_the_port_caveat_names_the_containers_ssh_port(tmp_path):
    assert "e.g. 2222 in -p 2222:22; with --network host, 22 itself)" in _text(_env(tmp_path))
    assert (
        "(PORT: the one for 2200, e.g. 2222 in -p 2222:2200; with --network host, 2200 itself)"
        in _text(_env(tmp_path, SSH_PORT="2200"))
    )


def test_on_the_hosts_network_the_ssh_line_gives_the_port_and_host(tmp_path):
    """--network host: the container's ports and name are the host's, so the banner knows
    the ssh command; a host with only lo and eth0 is not known, and says how to find it."""
    text = _text(_env(tmp_path, SSH_PORT="2200"), ("lo", "eth0", "docker0", "veth1a2b"))
    host = socket.gethostname()
    assert f"SSH        ssh -p 2200 jovyan@{host}" in text
    assert "are the host's (this container shares the host's network)" in text
    assert "host ports you published" not in text
    assert banner.host_network(["lo", "ens3"]) and banner.host_network(["lo", "eth0", "vm"])
    for own in (["lo", "eth0"], ["lo"], ["lo", "eth0", "eth1", "tunl0", "sit0", "ip6tnl0"]):
        assert not banner.host_network(own), own


def test_the_users_own_token_is_never_printed(tmp_path):
    (tmp_path / "jupyter-token").write_text("s3cret-value")
    text = _text(_env(tmp_path, JUPYTER_TOKEN="s3cret-value"))
    assert "s3cret-value" not in text
    assert "http://127.0.0.1:8888/lab?token=YOUR_TOKEN" in text


def test_no_key_says_how_to_turn_ssh_on_and_jupyter_off_has_no_url(tmp_path):
    text = _text(_env(tmp_path, SSHD_ENABLE="0", JUPYTER_ENABLE="0"))
    assert "ssh -p" not in text and "PUBLIC_KEY" in text
    assert "/lab?token" not in text


def test_services_left_off_for_a_taken_port_say_why_and_how_to_move_them(tmp_path):
    why = "port {} is already in use here (...); start this container with -e {}={}"
    (tmp_path / "ports-taken").write_text(
        f"jupyter\t{why.format(8888, 'JUPYTER_PORT', 8889)}\n"
        f"sshd\t{why.format(22, 'SSH_PORT', 23)}\n"
        f"metrics\t{why.format(9101, 'METRICS_PORT', 9102)}\n"
    )
    env = _env(tmp_path, SSHD_ENABLE="0", JUPYTER_ENABLE="0", METRICS_PORT="0")
    text = _text(env)
    assert f"Jupyter    off: {why.format(8888, 'JUPYTER_PORT', 8889)}" in text
    assert f"SSH        off: {why.format(22, 'SSH_PORT', 23)}" in text
    assert f"Metrics    off: {why.format(9101, 'METRICS_PORT', 9102)}" in text
    assert "PUBLIC_KEY" not in text  # the key was there: the port is why
    services = next(line for line in text.splitlines() if line.startswith("Services"))
    assert services == "Services   diskinfo (no metrics), train (your command)"
    assert "/lab?token" not in text and "metrics on port" not in text
    (tmp_path / "ports-taken").write_text("")  # nothing taken: the usual lines
    text = _text(_env(tmp_path, METRICS_PORT="9101"))
    assert "off:" not in text and "Metrics    http://127.0.0.1:9101/metrics" in text


def test_without_a_baseline_the_banner_suggests_bench_and_not_with_one(tmp_path):
    env = _env(tmp_path)
    assert "diskinfo bench /workspace/data" in _text(env)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "diskinfo-baseline.json").write_text("{}")
    assert "diskinfo bench" not in _text(env)
    own = tmp_path / "mine.json"
    assert str(own) in _text({**env, "DISKINFO_BASELINE": str(own)})


load("shared/safe_paths.py")  # supervisord-run.py imports it by bare name, from shared/
supervisord_run = load("run/supervisord-run.py")


@pytest.fixture
def generated(tmp_path, monkeypatch):
    """The image's supervisord.conf written as supervisord-run.py writes it."""
    env = {"STARTUP_STATE_DIR": tmp_path, "LOG_DIR": tmp_path, "NB_USER": "root"}
    env |= {"PYTORCH_CUDA_LIB": DOCKER}  # the image's start, run and shared are these
    env |= {"NB_HOME": "/root", "SSHD_ENABLE": "1", "JUPYTER_ENABLE": "1"}
    env |= {"TRAIN_ENABLE": "1", "TRAIN_STOP_TIMEOUT": "5"}
    for name, value in env.items():  # what entrypoint.sh exports before supervisord starts
        monkeypatch.setenv(name, str(value))
    config = tmp_path / "supervisord.conf"
    (tmp_path / "supervisord.conf.in").write_text((ETC / "supervisord.conf").read_text())
    supervisord_run.write_config(config, tmp_path / "supervisord.conf.in")
    return config


def test_the_running_config_is_root_only_with_a_fresh_password(generated):
    assert generated.stat().st_mode & 0o777 == 0o600
    first = generated.read_text()
    supervisord_run.write_config(generated, generated.with_name("supervisord.conf.in"))
    assert generated.read_text() != first  # a new password at every start


def test_supervisord_and_supervisorctl_both_read_the_credentials(generated):
    from supervisor.options import ClientOptions, ServerOptions

    server = ServerOptions()
    server.configfile = str(generated)
    server.process_config(do_usage=False)
    (http,) = server.configroot.supervisord.server_configs
    client = ClientOptions()
    client.configfile = str(generated)
    client.process_config(do_usage=False)
    assert http["username"] == client.username == "pytorch-cuda"
    assert http["password"] == client.password and len(client.password) == 32
    assert client.serverurl == f"unix://{generated.parent}/supervisor.sock"


def test_the_python_line_says_where_pip_install_goes(tmp_path):
    """`pip install` in the container goes to NB_USER's own environment (USER_VENV): the
    banner says so, as the first place a user would look for the Python they get."""
    assert "pip install" not in _text(_env(tmp_path))
    python = tmp_path / "user-venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    text = _text(_env(tmp_path, USER_VENV=str(tmp_path / "user-venv")))
    line = next(line for line in text.splitlines() if line.startswith("Python     "))
    assert f"your programs run {python}, where `pip install` adds packages" in line, line


def test_a_mounted_folder_the_user_cannot_write_says_how_to_hand_it_over(tmp_path):
    """Root on the host mounts a project folder of root's: Jupyter (uid 1000) cannot save."""
    facts = banner.gather(_env(tmp_path), ["lo", "eth0"])
    facts.unwritable = [("/workspace/code", 0)]
    text = "\n".join(banner.render(facts))
    assert (
        "Saving     jovyan (uid 1000) cannot write /workspace/code, uid 0's on the host: start"
        " the container with -e CHOWN_EXTRA=/workspace/code" in text
    ), text

    def folder(mode: int, uid: int, gid: int) -> os.stat_result:
        return os.stat_result((0o40000 | mode, 0, 0, 1, uid, gid, 0, 0, 0, 0))

    assert not places.writable_by(folder(0o755, 0, 0), 1000, {100})
    assert places.writable_by(folder(0o755, 1000, 100), 1000, {100})
    assert places.writable_by(folder(0o775, 0, 100), 1000, {100})
    # a read-only mount is meant so: never listed
    line = "36 35 0:1 / /workspace/data ro,relatime - ext4 /dev/vda rw"
    assert banner.unwritable_mounts(line, "jovyan", "1000", "100") == []
