"""A user's `pip install` keeps the image's torch stack: a package that needs another torch is
refused in one line that says how to override, one that accepts the image's torch installs, and
`PIP_CONSTRAINT= pip install ...` replaces the stack when the user insists. All offline, from
wheels made here: a `torch` 1.0.0 stand-in and packages that depend on torch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers.wheels import build_wheel

pytestmark = pytest.mark.image

FIND = "--no-index --find-links code"
SCRIPT = f"""
pip install {FIND} needs-old-torch; echo "REFUSED RC=$?"
python -c "import torch; print('TORCH', torch.__version__, torch.__file__)"
pip install {FIND} likes-torch >/dev/null && python -c "import likes_torch; print('LIKES ok')"
PIP_CONSTRAINT= pip install -q {FIND} needs-old-torch; echo "OVERRIDE RC=$?"
python -c "import torch; print('AFTER', torch.__version__, torch.__file__)"
"""


def _wheels(directory: Path) -> None:
    build_wheel(directory, "torch", "1.0.0", {"torch/__init__.py": b"__version__ = '1.0.0'\n"})
    build_wheel(directory, "needs-old-torch", "1.0", {"needs_old_torch.py": b""}, ("torch==1.0.0",))
    build_wheel(directory, "likes-torch", "1.0", {"likes_torch.py": b""}, ("torch>=1",))


def test_pip_refuses_another_torch_and_says_how_to_override(
    container, tmp_path: Path, ssh_key, ssh_client, ssh_run, wait_until
) -> None:
    _wheels(tmp_path)
    running = container(
        "bash",
        "-c",
        SCRIPT,
        env={"KEEP_ALIVE": "1", "PUBLIC_KEY": ssh_key.public},
        volumes={str(tmp_path): {"bind": "/workspace/code", "mode": "ro"}},
    )
    wait_until(lambda: "training exited with status" in running.logs(), 240, "no end")
    logs = running.logs()
    pinned = running.read_file("/etc/pip/constraint.txt")
    torch_pin = next(line for line in pinned.splitlines() if line.startswith("torch=="))
    assert "numpy==" in pinned, pinned

    assert "REFUSED RC=1" in logs, logs[-3000:]
    refusals = [line for line in logs.splitlines() if "pip: refused:" in line]
    assert len(refusals) == 1, logs[-3000:]
    assert f"({torch_pin}, pinned by PIP_CONSTRAINT=/etc/pip/constraint.txt)" in refusals[0]
    assert "to replace it anyway: PIP_CONSTRAINT= pip install" in refusals[0]
    # pip freeze gives PyPI's wheel its public version (2.7.1), torch itself adds the build's
    # local label (2.7.1+cu126); an index's wheel has it in both (2.7.1+cu118)
    version = torch_pin.split("==")[1].split("+")[0]
    assert re.search(rf"TORCH {re.escape(version)}(\+\S+)? /opt/venv/", logs), logs[-3000:]
    assert "LIKES ok" in logs, logs[-3000:]  # a package content with the image's torch installs
    # the documented override: the user's own torch, in the user's environment only
    assert "OVERRIDE RC=0" in logs and "AFTER 1.0.0 /opt/user-venv/" in logs, logs[-3000:]
    code, out = running.exec('python -c "import torch; print(torch.__version__)"')
    assert code == 0 and out.strip().split("+")[0] == version, out  # root keeps the image's

    # an SSH session (sshd starts it with a bare environment) has the pins too
    client = ssh_client(running, key=ssh_key.key)
    status, out = ssh_run(client, 'echo "$PIP_CONSTRAINT"; pip --version')
    assert status == 0 and out.splitlines()[0] == "/etc/pip/constraint.txt", out
