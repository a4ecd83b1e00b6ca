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


def bench_argv(directory: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "diskinfo.cli", "bench", str(directory), "--no-save", *args]


def bench(directory: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        bench_argv(directory, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def bench_run(directory: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    argv = bench_argv(directory, *args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def left_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(TEST_PREFIX + "*"))


def wait_for_test_file(directory: Path, proc: subprocess.Popen[str]) -> int:
    """The size of the bench's open test file in `directory`, once it is being read."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        for fd in Path(f"/proc/{proc.pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith(f"{directory}/{TEST_PREFIX}") and os.stat(fd).st_size > 0:
                return os.stat(fd).st_size
        time.sleep(0.05)
    raise AssertionError(f"the bench opened no test file (exit {proc.poll()})")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_an_ended_bench_leaves_no_test_file(tmp_path: Path, signum: int) -> None:
    """`timeout`, a closed SSH session and `docker stop` of the container a `docker exec`
    bench runs in (SIGKILL) end it midway: a hidden file of --size stayed in the data folder
    each time. The file has no name while it is written and read, so none can stay."""
    proc = bench(tmp_path, "--size", "256M", "--seconds", "30")
    wait_for_test_file(tmp_path, proc)
    assert left_files(tmp_path) == []  # no name, even while it is in use
    time.sleep(0.5)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (128 + signum, -signum), err
    assert "Traceback" not in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_left_test_file_is_removed_by_the_next_bench(tmp_path: Path) -> None:
    """A named test file that a killed bench of an earlier version left is removed by the next
    bench in that folder, which says so; one a running bench holds (locked) is kept."""
    left = tmp_path / f"{TEST_PREFIX}k2x9q1"
    in_use = tmp_path / f"{TEST_PREFIX}live"
    for path in (left, in_use):
        path.write_bytes(os.urandom(1 << 20))
    holder = os.open(in_use, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    old = time.time() - 3600
    for path in (left, in_use):
        os.utime(path, (old, old))
    try:
        done = bench_run(tmp_path, "--size", "16M", "--seconds", "0.2", timeout=120)
    finally:
        os.close(holder)
    assert done.returncode == 0, done.stderr
    assert f"removed {left} (1 MiB), a test file left by a bench that was killed" in done.stderr
    assert left_files(tmp_path) == [in_use]


def test_a_test_file_that_would_fill_the_disk_is_refused(tmp_path: Path) -> None:
    st = os.statvfs(tmp_path)
    free = st.f_bavail * st.f_frsize
    done = bench_run(tmp_path, "--size", str(free), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "test file does not fit in" in done.stderr
    assert "must stay free" in done.stderr
    assert list(tmp_path.iterdir()) == []
