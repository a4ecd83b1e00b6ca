"""`diskinfo` run as root gives up root for the owner of the folder it writes, before it reads
or writes anything, and says so once; it stays root only for a folder root owns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT


def _everyone_may_run(python: str) -> bool:
    """Whether uid 1234 could run `python`: every directory on its real path searchable by all."""
    real = Path(os.path.realpath(python))
    return real.exists() and all(os.stat(p).st_mode & 0o001 for p in real.parents)


# The interpreter must be one the dropped user can run: a root-only pyenv or venv is not.
PYTHON = next((p for p in ("/usr/bin/python3", sys.executable) if _everyone_may_run(p)), None)
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="dropping root needs root"),
    pytest.mark.skipif(PYTHON is None, reason="no Python every user may run"),
]
USER = 1234


def _diskinfo(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run(
        [str(PYTHON), "-m", "diskinfo.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd="/",
    )


def _tree(open_tmp_path: Path) -> Path:
    src = open_tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"{i}.txt").write_text(f"{i}\n")
    open_tmp_path.chmod(0o755)
    return src


def test_pack_into_a_users_folder_runs_as_that_user(open_tmp_path):
    src = _tree(open_tmp_path)
    (src / "9.txt").write_text("root only\n")
    (src / "9.txt").chmod(0o600)  # root could read it; the owner of DEST may not
    users = open_tmp_path / "users"
    users.mkdir()
    os.chown(users, USER, USER)
    done = _diskinfo("pack", str(src), str(users / "out"))
    assert done.returncode == 2, done
    lines = done.stderr.splitlines()
    assert lines[0] == (
        f"diskinfo: running as uid {USER}, the owner of {users}: "
        "root does not write in a folder another user controls"
    )
    assert lines[1:] == [f"diskinfo: error: cannot read {src / '9.txt'}: Permission denied"]


def test_pack_into_roots_folder_stays_root_and_says_nothing(open_tmp_path):
    src = _tree(open_tmp_path)
    done = _diskinfo("pack", str(src), str(open_tmp_path / "out"))
    assert done.returncode == 0, done
    assert "running as" not in done.stderr
    assert all(p.stat().st_uid == 0 for p in (open_tmp_path / "out").iterdir())


def test_report_png_beside_a_users_jsonl_is_written_as_that_user(open_tmp_path):
    logs = open_tmp_path / "logs"
    logs.mkdir()
    os.chown(logs, USER, USER)
    (logs / "diskinfo.jsonl").write_text("")
    done = _diskinfo("report", str(logs / "diskinfo.jsonl"), "--no-png")
    assert f"running as uid {USER}, the owner of {logs}" in done.stderr, done


def test_tune_drops_before_it_imports_the_users_code(open_tmp_path):
    """The user's Dataset factory is the user's code: it never runs as root for their folder."""
    users = open_tmp_path / "users"
    users.mkdir()
    os.chown(users, USER, USER)
    done = _diskinfo("tune", "planted:factory", "--out", str(users / "tune"), "--budget", "1")
    assert done.stderr.startswith(f"diskinfo: running as uid {USER}, the owner of {users}"), done
