"""supervisord's configuration and its event listener, outside the image: what decides the
lines a clean run leaves at the end of `docker logs`."""

from __future__ import annotations

import configparser
import os
import re
import signal
import subprocess
import sys
import time

from tests.helpers import ROOT
from tests.helpers.scripts import DOCKER

CONF = DOCKER / "etc" / "supervisord.conf"
SRC = ROOT / "src"  # the diskinfo the image installs: this checkout's
LISTENER = DOCKER / "run" / "train-exit-listener.py"


def test_every_stop_wait_outlasts_supervisords_poll() -> None:
    """supervisord checks a stopping program's deadline before it reaps, after a poll of up
    to 1 s that a child's death does not end: at stopwaitsecs=1 it sent SIGKILL to a listener
    already ended on SIGTERM (docker logs: "WARN killing 'train-exit' (115) with SIGKILL" in
    one clean run of four). The training command's is the user's (TRAIN_STOP_TIMEOUT)."""
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(CONF)
    waits = {
        name: conf[name].get("stopwaitsecs", "10")  # supervisord's default
        for name in conf.sections()
        if name.startswith(("program:", "eventlistener:"))
    }
    assert "eventlistener:train-exit" in waits and "program:sshd" in waits, waits
    assert waits.pop("program:train") == "%(ENV_TRAIN_STOP_TIMEOUT)s"
    assert {name: int(w) for name, w in waits.items() if int(w) < 2} == {}


def test_the_train_exit_listener_ends_cleanly_on_sigterm(tmp_path) -> None:
    """supervisord's SIGTERM at the container's end is the listener's normal end: exit 0
    ('INFO stopped: train-exit (exit status 0)'), not a WARN 'terminated by SIGTERM'."""
    # this checkout's diskinfo (safe_paths takes the log names from it); the image's ENV
    env = {**os.environ, "PYTHONPATH": str(SRC), "STARTUP_STATE_DIR": str(tmp_path)}
    listener = subprocess.Popen(
        [sys.executable, str(LISTENER)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    try:
        assert listener.stdout is not None
        assert listener.stdout.readline() == b"READY\n"  # waiting for an event, as in the image
        listener.send_signal(signal.SIGTERM)
        assert listener.wait(timeout=10) == 0, listener.stderr.read() if listener.stderr else ""
    finally:
        listener.kill()
        listener.communicate()


def test_outside_the_image_a_missing_setting_is_one_line_not_a_default() -> None:
    """The Dockerfile's ENV is the one place with the defaults: run without it, the listener
    says which setting is missing, where a default would have used the image's /run path."""
    env = {k: v for k, v in os.environ.items() if k != "STARTUP_STATE_DIR"}
    done = subprocess.run(
        [sys.executable, str(LISTENER)],
        env={**env, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        "train-exit-listener: STARTUP_STATE_DIR not set: the image sets it (Dockerfile ENV)\n"
    )


def _supervisord_with_a_training_command(tmp_path, password_for_the_listener: str) -> str:
    """A real supervisord running `train` (ends at once) and the train-exit listener, as in
    the image; returns its log once it has ended by itself."""
    sock = tmp_path / "supervisor.sock"
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "exit").write_text("0\n")
    conf = f"""
[unix_http_server]
file={sock}
username=pytorch-cuda
password=right

[supervisord]
nodaemon=true
logfile={tmp_path}/supervisord.log
pidfile={tmp_path}/supervisord.pid
childlogdir={tmp_path}

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{sock}
username=pytorch-cuda
password={password_for_the_listener}

[program:train]
command={sys.executable} -c "import time; time.sleep(0.5)"
autorestart=false
startsecs=0
startretries=0

[eventlistener:train-exit]
"""
    # the image's listener section, run from here: its events, priority and stop wait as is
    image = configparser.ConfigParser(interpolation=None)
    image.read(CONF)
    listener = {
        **image["eventlistener:train-exit"],
        "command": f"{sys.executable} {LISTENER}",
        "environment": f'STARTUP_STATE_DIR="{tmp_path}",PYTHONPATH="{SRC}"',
        "autorestart": "false",  # a listener that fails to start fails the test, not loops
        "stderr_logfile": f"{tmp_path}/listener.err",
    }
    conf += "".join(f"{key}={value}\n" for key, value in listener.items())
    (tmp_path / "supervisord.conf").write_text(conf)
    supervisord = subprocess.run(
        [sys.executable, "-m", "supervisor.supervisord", "-c", str(tmp_path / "supervisord.conf")],
        capture_output=True,
        timeout=30,  # it never ends if the listener cannot end it
        cwd=tmp_path,
    )
    log = (tmp_path / "supervisord.log").read_text()
    assert supervisord.returncode == 0, log
    # the listener ends itself once supervisord is shutting down (exited), or on its SIGTERM
    assert re.search(r"INFO (exited|stopped): train-exit \(exit status 0", log), log
    assert "SIGKILL" not in log, log
    return log + (tmp_path / "listener.err").read_text()


def test_the_listener_ends_a_clean_run_without_a_warning(tmp_path) -> None:
    """A SIGTERM to PID 1 made every clean end in docker logs read 'WARN received SIGTERM
    indicating exit request': the listener asks over the control socket instead."""
    log = _supervisord_with_a_training_command(tmp_path, "right")
    assert "exited: train (exit status 0; expected)" in log, log
    assert "received SIGTERM" not in log and "WARN" not in log, log


def test_the_listener_still_ends_the_run_when_the_socket_refuses_it(tmp_path) -> None:
    log = _supervisord_with_a_training_command(tmp_path, "wrong")
    assert "through the control socket failed" in log and "received SIGTERM" in log, log


def test_a_stop_while_jupyterlab_starts_is_a_clean_exit(tmp_path) -> None:
    """JupyterLab's SIGTERM handler comes with its server, a second or two in: a container
    whose command took a second logged 'WARN stopped: jupyter (terminated by SIGTERM)'.
    jupyter-lab.py handles it before the slow import (here a stand-in labapp that sleeps)."""
    fake = tmp_path / "jupyterlab"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "labapp.py").write_text(
        "import pathlib, sys, time\n"
        f"pathlib.Path({str(tmp_path / 'importing')!r}).touch()\n"
        "time.sleep(30)\n"
        "def main():\n    return 3\n"
    )
    server = subprocess.Popen(
        [sys.executable, str(DOCKER / "run" / "jupyter-lab.py"), "--no-browser"],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / "importing").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 0  # was -15: killed by the signal
    finally:
        server.kill()
        server.wait()
