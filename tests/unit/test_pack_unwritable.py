"""pack into a folder it cannot write says so before any work: which folder, whose it is, and
the way out (in the image, a root user's project folder: CHOWN_EXTRA), never a temporary
file's name ("Permission denied: .../tmp7uir59xl")."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers import tools


@pytest.fixture
def world_readable() -> Path:
    """A folder another uid can read (pytest's tmp_path is root's alone)."""
    with tempfile.TemporaryDirectory() as name:
        os.chmod(name, 0o755)
        yield Path(name)


@pytest.mark.skipif(os.geteuid() != 0, reason="makes a folder another uid cannot write")
def test_an_unwritable_dest_names_the_folder_its_owner_and_the_fix(world_readable: Path):
    src, project = world_readable / "src", world_readable / "project"
    (src / "a").mkdir(parents=True)
    (src / "a" / "0001.jpg").write_bytes(b"x" * 100)
    project.mkdir(mode=0o755)  # root's, as a root user's project folder on a cloud VM
    setpriv = tools.find("setpriv")
    command = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable]
    command += ["-m", "diskinfo.cli", "pack", str(src), str(project / "shards")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    plain = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert plain.returncode != 0 and plain.stdout == "", plain
    (line,) = plain.stderr.splitlines()
    assert line.startswith(f"diskinfo: error: cannot write DEST's folder (for {project}/shards)")
    assert f"{project} (owned by uid 0, mode 755; this runs as uid 65534)" in line, line
    assert "pack into a folder you can write" in line and "tmp" not in line.split(project.name)[-1]
    # in the image: the setting that hands a mounted folder of root's to the user
    env["PYTORCH_CUDA_LIB"] = "/usr/local/lib/pytorch-cuda"
    image = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert image.returncode != 0 and "start the container with -e CHOWN_EXTRA=/" in image.stderr
