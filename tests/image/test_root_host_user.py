"""Root on the host (cloud GPU VMs): the project folder is root's, the services run as jovyan
(uid 1000), so Jupyter's saves and `diskinfo pack` failed there with no word on what to do.
The banner says it and names the setting; CHOWN_EXTRA hands a mounted folder to jovyan at
start, by descriptor (a planted link is not followed); anything but a mount under /workspace
is refused in one line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.image


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A root user's project folder: root's, 0755, with a notebook and a planted link."""
    folder = tmp_path / "project"
    (folder / "data" / "a").mkdir(parents=True)
    (folder / "data" / "a" / "0001.jpg").write_bytes(b"x" * 100)
    (folder / "train.ipynb").write_text("{}")
    (folder / "passwd").symlink_to("/etc/passwd")
    for path in (tmp_path, folder, folder / "data", folder / "data" / "a"):
        os.chmod(path, 0o755)
    return folder


def test_the_banner_and_pack_say_how_and_chown_extra_hands_the_folder_over(
    container, project: Path, wait_until
):
    mount = {str(project): {"bind": "/workspace/code", "mode": "rw"}}
    running = container(volumes=mount)
    running.wait_for_program("diskinfo")
    logs = running.logs()
    assert (
        "Saving     jovyan (uid 1000) cannot write /workspace/code, uid 0's on the host: start"
        " the container with -e CHOWN_EXTRA=/workspace/code" in logs
    ), logs[-3000:]
    code, out = running.exec(
        "diskinfo pack /workspace/code/data /workspace/code/shards", user="jovyan"
    )
    assert code != 0 and len(out.strip().splitlines()) == 1, out
    assert "cannot write DEST's folder (for /workspace/code/shards) /workspace/code" in out, out
    assert "-e CHOWN_EXTRA=/workspace/code" in out and "/tmp" not in out, out

    handed = container(volumes=mount, env={"CHOWN_EXTRA": "/workspace/code"})
    handed.wait_for_program("diskinfo")
    assert "Saving " not in handed.logs(), handed.logs()[-3000:]
    code, out = handed.exec(
        "touch /workspace/code/new.ipynb && echo '{}' > /workspace/code/train.ipynb"
        " && diskinfo pack /workspace/code/data /workspace/code/shards",
        user="jovyan",
    )
    assert code == 0, out
    assert (project / "new.ipynb").stat().st_uid == 1000
    assert (project / "shards" / "manifest.json").stat().st_uid == 1000
    # the planted link was not followed: /etc/passwd in the container is root's as before
    assert handed.exec("stat -c %u /etc/passwd")[1].strip() == "0"
    assert (project / "passwd").is_symlink() and os.lstat(project / "passwd").st_uid == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/etc", "/etc is not a folder you mounted at or under /workspace"),
        ("/workspace/examples", "/workspace/examples is not a folder you mounted at or under"),
    ],
)
def test_chown_extra_takes_only_a_mounted_folder(container, value, message):
    running = container(env={"CHOWN_EXTRA": value})
    assert running.wait(timeout=60) != 0
    errors = [line for line in running.logs().splitlines() if line.startswith("ERROR")]
    assert len(errors) == 1 and message in errors[0], running.logs()[-2000:]
