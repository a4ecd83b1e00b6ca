"""supervisord's configuration and its event listener, outside the image: what decides the
lines a clean run leaves at the end of `docker logs`."""

from __future__ import annotations

import configparser
import os
import signal
import subprocess
import sys

from tests.helpers import ROOT
from tests.helpers.scripts import DOCKER, path_of

CONF = DOCKER / "etc" / "supervisord.conf"


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


def test_the_train_exit_listener_ends_cleanly_on_sigterm() -> None:
    """supervisord's SIGTERM at the container's end is the listener's normal end: exit 0
    ('INFO stopped: train-exit (exit status 0)'), not a WARN 'terminated by SIGTERM'."""
    env = {**os.environ, "PYTHONPATH": str(path_of("safe_paths.py").parent)}
    listener = subprocess.Popen(
        [sys.executable, str(path_of("train-exit-listener.py"))],
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
