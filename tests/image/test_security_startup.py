"""Nothing a user creates blocks the start (what a user leaves in their home must not lock
them out): a FIFO at ~/.ssh/authorized_keys, a hook that leaves `sleep 600 &` behind; and
PUBLIC_KEY lines with options are kept."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.image

HOOK = "#!/bin/sh\necho started a background job\nsleep 600 &\n"


def test_a_fifo_and_a_lingering_hook_do_not_hang_the_start(container, ssh_key, tmp_path):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "10-background").write_text(HOOK)
    (hooks / "10-background").chmod(0o755)
    running = container(
        env={"PUBLIC_KEY": ssh_key.public, "STARTUP_HOOK_TIMEOUT": "3"},
        volumes={str(hooks): {"bind": "/workspace/.startup.d", "mode": "ro"}},
    )
    running.wait_for_program("sshd", timeout=60)
    code, out = running.exec("mkdir -p ~/.ssh && mkfifo ~/.ssh/authorized_keys", user="jovyan")
    assert code == 0, out
    start = time.monotonic()
    running.obj.restart(timeout=10)
    running.wait_for_program("sshd", timeout=60)
    assert time.monotonic() - start < 45
    logs = running.logs()
    stopped = [x for x in logs.splitlines() if "10-background: stopped after 3 s" in x]
    assert len(stopped) == 2 and all(x.startswith("ERROR") for x in stopped), logs[-3000:]
    assert "background job" in logs
    assert "authorized_keys not read: /home/jovyan/.ssh/authorized_keys is a FIFO" in logs
    # the hook's background job went with its process group
    assert running.exec("pgrep -x -f 'sleep 600'")[0] != 0


def test_public_key_lines_with_options_are_kept(container, ssh_key, ssh_client, ssh_run):
    line = f'from="127.0.0.1,::1",no-agent-forwarding {ssh_key.public}'
    running = container(env={"PUBLIC_KEY": f"# my key\n{line}"})
    running.wait_for_program("sshd", timeout=60)
    assert line in running.read_file("/etc/ssh/authorized_keys.d/jovyan")
    assert ssh_run(ssh_client(running, ssh_key.key), "id -un") == (0, "jovyan\n")
