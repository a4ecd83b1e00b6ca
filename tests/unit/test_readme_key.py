"""The quickstart's `-e PUBLIC_KEY="$(...)"`, run by bash as the README writes it, in homes a new
user may have: no key at all (no error on the terminal, SSH simply off), only an RSA key, or
several keys (every one of them reaches the container, and each passes the start-up's check)."""

from __future__ import annotations

import base64
import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers.readme import readme_command
from tests.helpers.scripts import load

ssh_keys = load("start/ssh_keys.py")

ED25519 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMy/wCKJ7GnsawncSSEJxyqhGZ1b5lq7wc4Py7LYsVxV me@host"
# an RSA public key line in the wire format sshd reads (type, e, n); the check looks at the type
RSA = (
    "ssh-rsa "
    + base64.b64encode(b"\0\0\0\x07ssh-rsa\0\0\0\x03\x01\0\x01\0\0\0\x01\x07").decode()
    + " me@laptop"
)


def _expression() -> str:
    """The shell word after `-e PUBLIC_KEY=` in the quickstart's training command."""
    command = readme_command(lambda c: c.startswith("docker run") and "code/train.py" in c)
    found = re.search(r'-e PUBLIC_KEY=("\$\(.*?\)")', command)
    assert found, f"the training command passes no PUBLIC_KEY: {command}"
    return found.group(1)


def _run(home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"printf %s {_expression()}"],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=10,
    )


def _home(tmp_path: Path, keys: dict[str, str]) -> Path:
    ssh = tmp_path / ".ssh"
    ssh.mkdir()
    for name, line in keys.items():
        (ssh / name).write_text(line + "\n")
    (ssh / "id_ed25519").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (ssh / "known_hosts").write_text("host ssh-ed25519 AAAA\n")
    return tmp_path


def test_a_home_without_any_key_prints_nothing_and_passes_an_empty_key(tmp_path):
    out = _run(tmp_path)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


@pytest.mark.parametrize(
    "keys",
    [
        {"id_ed25519.pub": ED25519},
        {"id_rsa.pub": RSA},
        {"id_ed25519.pub": ED25519, "id_rsa.pub": RSA},
    ],
    ids=["ed25519", "rsa-only", "both"],
)
def test_every_public_key_and_nothing_else_is_passed(tmp_path, keys):
    out = _run(_home(tmp_path, keys))
    assert out.returncode == 0 and out.stderr == ""
    assert sorted(out.stdout.splitlines()) == sorted(keys.values())  # no private key, known_hosts
    passed, bad = ssh_keys.key_lines(out.stdout)  # what the start-up checks PUBLIC_KEY with
    assert sorted(passed) == sorted(keys.values()) and bad == []
