"""`diskinfo bench DIR` writes a test file of gigabytes into the user's data folder, often
beside a running training job (`docker exec`): it must never be left behind, whatever ends
the bench, and never fill the disk."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diskinfo.bench import TEST_PREFIX

pytestmark = [pytest.mark.system]


def bench(directory: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "diskinfo.cli", "bench", str(directory), "--no-save", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def left_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(TEST_PREFIX + "*"))


def wait_for_test_file(directory: Path, proc: subprocess.Popen[str]) -> Path:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if found := left_files(directory):
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no test file appeared (bench exit {proc.poll()})")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_bench_removes_its_test_file(tmp_path: Path, signum: int) -> None:
    """`docker stop`, `timeout` and a closed SSH session send SIGTERM or SIGHUP, on which
    Python dies without running cleanup: the test file stayed (a hidden 512 MiB per try)."""
    proc = bench(tmp_path, "--size", "256M", "--seconds", "30")
    wait_for_test_file(tmp_path, proc)
    time.sleep(0.5)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert "Traceback" not in err, err
    assert left_files(tmp_path) == []


def test_a_killed_bench_s_test_file_is_removed_by_the_next(tmp_path: Path) -> None:
    """SIGKILL (OOM, `docker kill`) runs no cleanup at all: the next bench in that folder
    removes what a dead bench left, and says so; a test file a live bench holds is kept."""
    proc = bench(tmp_path, "--size", "256M", "--seconds", "30")
    left = wait_for_test_file(tmp_path, proc)
    proc.kill()
    proc.communicate(timeout=30)
    assert left.exists()
    in_use = tmp_path / f"{TEST_PREFIX}live"
    in_use.write_bytes(b"x" * 4096)
    holder = os.open(in_use, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # as a running bench holds its own
    old = time.time() - 3600
    for path in (left, in_use):
        os.utime(path, (old, old))
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "diskinfo.cli",
                "bench",
                str(tmp_path),
                "--size",
                "16M",
                "--seconds",
                "0.2",
                "--no-save",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(holder)
    assert done.returncode == 0, done.stderr
    assert f"removed {left} (" in done.stderr and "left by a bench that was killed" in done.stderr
    assert left_files(tmp_path) == [in_use]


def test_a_test_file_that_would_fill_the_disk_is_refused(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "diskinfo.cli",
            "bench",
            str(tmp_path),
            "--size",
            str(free),
            "--no-save",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "test file does not fit in" in done.stderr
    assert "must stay free" in done.stderr
    assert left_files(tmp_path) == []
