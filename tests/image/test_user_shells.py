"""Every way a user gets a shell or runs a command finds the same Python, pip and diskinfo, and
`pip install` / `uv pip install` go to NB_USER's environment with the same refusal line:

- the training command wrapped in a login shell (`bash -lc`, as Slurm batch scripts, Kubernetes
  `command:` and CI jobs write it), `bash -ic`, `sh -lc`;
- `docker exec -u jovyan C pip install ...`, which runs no shell at all (the README's "a shell in
  the running container" row), and the same in login and interactive shells (a Jupyter
  terminal is `bash -l`: jupyter_server_config.py);
- root's, which never runs NB_USER's environment.

All offline, from wheels made here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.wheels import build_wheel

pytestmark = pytest.mark.image

USER_VENV = "/opt/user-venv"
IMAGE_VENV = "/opt/venv"
FIND = "--no-index --find-links /workspace/code"
# what a shell finds: its python's prefix, and pip, diskinfo and uv
PROBE = (
    "python -c \"import sys, torch; print('PREFIX', sys.prefix)\""
    " && pip --version >/dev/null && echo PIP ok"
    " && diskinfo --version >/dev/null && echo DISKINFO ok"
    " && uv --version >/dev/null && echo UV ok"
)
SHELLS = {
    "bash -c": ["bash", "-c"],
    "bash -lc": ["bash", "-lc"],
    "bash -ic": ["bash", "-ic"],
    "sh -lc": ["sh", "-lc"],
}


# A Jupyter terminal, driven as the browser drives it (REST to open it, its websocket to type),
# from inside the container with the image's tornado: the terminal is `bash -l` as jovyan.
TERMINAL = r"""
import json, sys, urllib.request
from tornado import httpclient, ioloop, websocket
port, token, line = sys.argv[1:]
auth = {"Authorization": "token " + token}
opened = urllib.request.Request(
    f"http://127.0.0.1:{port}/api/terminals", data=b"{}", method="POST",
    headers={**auth, "Content-Type": "application/json"})
name = json.load(urllib.request.urlopen(opened))["name"]
async def main():
    url = f"ws://127.0.0.1:{port}/terminals/websocket/{name}"
    ws = await websocket.websocket_connect(httpclient.HTTPRequest(url, headers=auth))
    ws.write_message(json.dumps(["stdin", line + "; echo TERMINAL-$((40+2))\r"]))
    out = ""
    while "TERMINAL-42" not in out:
        message = await ws.read_message()
        if message is None:
            break
        kind, *rest = json.loads(message)
        out += rest[0] if kind == "stdout" else ""
    print(out)
ioloop.IOLoop.current().run_sync(main, timeout=120)
"""


def _wheels(directory: Path) -> None:
    build_wheel(directory, "demo-pkg", "0.1", {"demo_pkg.py": b"VALUE = 42\n"})
    build_wheel(directory, "uv-pkg", "0.1", {"uv_pkg.py": b"VALUE = 7\n"})
    build_wheel(directory, "torch", "1.0.0", {"torch/__init__.py": b"__version__ = '1.0.0'\n"})
    build_wheel(directory, "needs-old-torch", "1.0", {"needs_old_torch.py": b""}, ("torch==1.0",))


@pytest.fixture(scope="module")
def running(module_container, tmp_path_factory):
    """A container whose training command is a login shell, as a batch script writes it."""
    code = tmp_path_factory.mktemp("code")
    _wheels(code)
    container = module_container(
        "bash",
        "-lc",
        f"{PROBE} && echo TRAINING-DONE",
        env={"KEEP_ALIVE": "1"},
        volumes={str(code): {"bind": "/workspace/code", "mode": "ro"}},
    )
    container.wait_for_program("diskinfo")
    return container


def test_a_login_shell_as_the_training_command_finds_pythons_and_tools(running, wait_until):
    wait_until(lambda: "training exited with status" in running.logs(), 120, "no end")
    logs = running.logs()
    assert "training exited with status 0" in logs, logs[-3000:]
    assert f"PREFIX {USER_VENV}" in logs and "DISKINFO ok" in logs and "UV ok" in logs, logs


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("user", ["jovyan", "root"])
def test_every_shell_finds_what_a_plain_one_does(running, shell, user):
    """Login shells start from /etc/profile, which sets PATH anew; `docker exec` runs none."""
    code, out = running.exec([*SHELLS[shell], PROBE], user=user)
    prefix = USER_VENV if user == "jovyan" else IMAGE_VENV
    assert code == 0, out
    # bash -i without a terminal says so ("no job control"): not what it found
    lines = [line for line in out.splitlines() if line.strip() and not line.startswith("bash: ")]
    assert lines == [f"PREFIX {prefix}", "PIP ok", "DISKINFO ok", "UV ok"], out


def test_docker_exec_as_the_user_installs_into_the_users_environment(running):
    """No shell at all: `docker exec -u jovyan C pip install ...`, then python, uv, a login
    shell and an interactive one all see it; root sees none of it."""
    code, out = running.exec(["pip", "install", *FIND.split(), "demo-pkg"], user="jovyan")
    assert code == 0 and "Successfully installed demo-pkg" in out, out
    code, out = running.exec(["bash", "-lc", f"uv pip install {FIND} uv-pkg"], user="jovyan")
    assert code == 0, out
    code_line = "import demo_pkg, uv_pkg, sys; print(sys.prefix, demo_pkg.VALUE, uv_pkg.VALUE)"
    check = f'python -c "{code_line}"'
    for argv in (
        ["python", "-c", code_line],
        ["bash", "-lc", check],
        ["bash", "-ic", check],
        ["sh", "-lc", check],
    ):
        code, out = running.exec(argv, user="jovyan")
        assert code == 0 and f"{USER_VENV} 42 7" in out, (argv, out)
    assert running.exec(f"ls {USER_VENV}/lib/python3*/site-packages/uv_pkg.py")[0] == 0
    # root: the image's environment only, and nothing of the user's
    code, out = running.exec(["python", "-c", "import demo_pkg"])
    assert code != 0 and "ModuleNotFoundError" in out, out
    code, out = running.exec(["python", "-c", "import sys; print(sys.prefix)"])
    assert out.strip() == IMAGE_VENV, out


@pytest.mark.parametrize("tool", ["pip", "uv"])
def test_pip_and_uv_refuse_another_torch_alike_from_any_shell(running, tool):
    """The same one line after the tool's own explanation, from `docker exec -u jovyan` and
    from a login shell; the image's torch stays."""
    install = f"{tool} pip install" if tool == "uv" else "pip install"
    setting = "UV_CONSTRAINT" if tool == "uv" else "PIP_CONSTRAINT"
    pinned = running.read_file("/etc/pip/constraint.txt")
    torch_pin = next(line for line in pinned.splitlines() if line.startswith("torch=="))
    for argv in (
        [*install.split(), *FIND.split(), "needs-old-torch"],
        ["bash", "-lc", f"{install} {FIND} needs-old-torch"],
    ):
        code, out = running.exec(argv, user="jovyan")
        refusals = [line for line in out.splitlines() if f"{tool}: refused:" in line]
        assert code != 0 and len(refusals) == 1, (argv, out)
        assert f"({torch_pin}, pinned by {setting}=/etc/pip/constraint.txt)" in refusals[0]
        assert f"to replace it anyway: {setting}= {tool} " in refusals[0], refusals[0]
    code, out = running.exec(["python", "-c", "import torch; print(torch.__file__)"], user="jovyan")
    assert code == 0 and out.startswith(f"{IMAGE_VENV}/"), out


def test_a_jupyter_terminal_finds_and_installs_as_every_other_shell(
    container, jupyter_ready, tmp_path: Path
):
    """Jupyter's terminal is a login shell (`bash -l`), whose /etc/profile sets PATH anew."""
    _wheels(tmp_path)
    running = container(
        env={"JUPYTER_ENABLE": "1"},
        volumes={str(tmp_path): {"bind": "/workspace/code", "mode": "ro"}},
    )
    token = jupyter_ready(running)
    line = f"{PROBE}; pip install {FIND} demo-pkg >/dev/null; pip install {FIND} needs-old-torch"
    port = str(running.ports["JUPYTER_PORT"])
    code, out = running.exec(
        ["/opt/venv/bin/python", "-c", TERMINAL, port, token, line], user="jovyan", timeout=150
    )
    assert code == 0, out
    for seen in (f"PREFIX {USER_VENV}", "PIP ok", "DISKINFO ok", "UV ok", "pip: refused:"):
        assert seen in out, (seen, out)
    code, out = running.exec(["python", "-c", "import demo_pkg, sys; print(sys.prefix)"], "jovyan")
    assert code == 0 and out.strip() == USER_VENV, out
