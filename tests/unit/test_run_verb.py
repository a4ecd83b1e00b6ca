"""`diskinfo run`'s choices that need no image: where the logs go, what stands in for a HOME
or a name that is missing, and the one line when it is run outside the image."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from diskinfo.commands import run


def test_the_logs_folder_is_the_working_folders_or_the_setting():
    assert run.default_log_dir({}, "/p") == "/p/logs"
    assert run.default_log_dir({"DISKINFO_LOG_DIR": "/x"}, "/p") == "/x"


def test_a_slurm_step_gets_one_folder_a_node():
    env = {"SLURM_STEP_ID": "0", "SLURMD_NODENAME": "gpu07"}
    assert run.default_log_dir(env, "/p") == "/p/logs/gpu07"
    assert run.default_log_dir({**env, "DISKINFO_LOG_DIR": "/x"}, "/p") == "/x"


def test_a_folder_that_cannot_be_written_says_why(tmp_path: Path):
    assert run.writable_dir(str(tmp_path / "new" / "logs")) is None
    (tmp_path / "file").write_text("")
    assert run.writable_dir(str(tmp_path / "file" / "logs"))  # a file in the way


@pytest.mark.parametrize("home", ["", "/", "/proc/no-such-home"])
def test_a_home_that_cannot_be_written_gets_one_under_tmp(home, tmp_path, monkeypatch):
    monkeypatch.setattr(run.tempfile, "gettempdir", lambda: str(tmp_path))
    env = {"HOME": home} if home else {}
    notes: list[str] = []
    run.fix_home(env, notes)
    assert env["HOME"] == str(tmp_path / f"pytorch-cuda-home-{os.getuid()}")
    assert len(notes) == 1 and "set HOME to a folder you can write" in notes[0], notes


def test_a_planted_home_stand_in_is_never_used(tmp_path, monkeypatch):
    """Someone else's link at /tmp/pytorch-cuda-home-UID must not become our HOME."""
    monkeypatch.setattr(run.tempfile, "gettempdir", lambda: str(tmp_path))
    (tmp_path / f"pytorch-cuda-home-{os.getuid()}").symlink_to("/etc")
    env: dict[str, str] = {}
    notes: list[str] = []
    run.fix_home(env, notes)
    assert "HOME" not in env and "no private folder could be made" in notes[0], notes


def test_a_writable_home_is_kept(tmp_path):
    env, notes = {"HOME": str(tmp_path)}, []
    run.fix_home(env, notes)
    assert env == {"HOME": str(tmp_path)} and notes == []


def test_outside_the_image_it_says_so_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTORCH_CUDA_LIB"}
    out = subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", "run", "--", "true"],
        env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "PYTORCH_CUDA_LIB" in out.stderr and "inside the image" in out.stderr


def test_no_command_is_one_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", "run"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 2 and "needs a command after --" in out.stderr, out.stderr


def test_the_banner_without_services_keeps_what_holds_there():
    from tests.helpers.scripts import load

    banner = load("start/banner.py")
    run_banner = load("start/run_banner.py")
    facts = banner.Facts(
        python="3.10.12", torch="2.7.1", cuda="11.8", shm_mb=64, shm_small=True,
        services=[banner.Service("sshd", "port 22")], ssh_command="ssh -p PORT jovyan@HOST",
        logs_dir="/home/me/project/logs", baseline_path="/home/me/project/logs/b.json",
    )  # fmt: skip
    text = "\n".join(run_banner.render(facts))
    assert text.startswith("==== pytorch-cuda-diskinfo") and "torch      2.7.1" in text
    for gone in ("Services", "SSH", "docker exec", "docker logs", "Persists", "see above"):
        assert gone not in text, (gone, text)
    assert "64 MB: too small for DataLoader workers" in text and "--shm-size=16g" in text
    assert "Logs       /home/me/project/logs/: train.log" in text
    assert "`diskinfo bench DATA_FOLDER`" in text
