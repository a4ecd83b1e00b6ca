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

from diskinfo.readspeed import TEST_PREFIX
from diskinfo.units import MIB
from tests.helpers.loopdev import NEEDS_ROOT, ext4_loop, mounted

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
    proc.kill()
    _, err = proc.communicate()
    raise AssertionError(f"the bench opened no test file (exit {proc.returncode}): {err}")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_an_ended_bench_leaves_no_test_file(tmp_path: Path, signum: int) -> None:
    """`timeout`, a closed SSH session and `docker stop` of the container a `docker exec`
    bench runs in (SIGKILL) end it midway: a hidden file of --size stayed in the data folder
    each time. The file has no name while it is written and read, so none can stay. It is
    small: the bench keeps 1 GiB free beside it, and CI's disk may have little more."""
    proc = bench(tmp_path, "--size", "32M", "--seconds", "30")
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


@pytest.mark.skipif(NEEDS_ROOT, reason="needs root and losetup for a read-only ext4")
def test_a_read_only_directory_is_measured_by_reading_its_largest_file(tmp_path: Path) -> None:
    """A dataset mounted read-only (`-v /data:/workspace/data:ro`) took the README's one-time
    `diskinfo bench /workspace/data` to "not writable; pass a large file": the bench now reads
    the largest file there, on that disk (not under another mount below it)."""
    with ext4_loop(tmp_path, 256) as (mnt, _dev):
        (mnt / "train" / "a").mkdir(parents=True)
        (mnt / "small.bin").write_bytes(os.urandom(2 * MIB))
        (mnt / "train" / "a" / "shard-000.tar").write_bytes(os.urandom(80 * MIB))
        (mnt / "train" / "a" / "shard-001.tar").write_bytes(os.urandom(70 * MIB))
        (mnt / "elsewhere").mkdir()
        with mounted("tmpfs", str(mnt / "elsewhere"), "-t", "tmpfs", "-o", "size=200m"):
            (mnt / "elsewhere" / "bigger.bin").write_bytes(b"\0" * (100 * MIB))
            subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
            before = sorted(p.name for p in mnt.rglob("*"))
            done = bench_run(mnt, "--seconds", "0.5", timeout=60)
            assert done.returncode == 0, done.stderr
            largest = mnt / "train" / "a" / "shard-000.tar"
            said = f"is not writable: reading its largest file instead of a test file, {largest}"
            assert f"{said} (80 MiB)" in done.stderr, done.stderr
            assert "sequential read" in done.stdout and "IOPS" in done.stdout, done.stdout
            assert sorted(p.name for p in mnt.rglob("*")) == before


@pytest.mark.skipif(NEEDS_ROOT, reason="needs root and losetup for a read-only ext4")
def test_a_read_only_directory_of_small_files_is_one_line(tmp_path: Path) -> None:
    with ext4_loop(tmp_path, 64) as (mnt, _dev):
        for i in range(20):
            (mnt / f"img-{i:03d}.jpg").write_bytes(os.urandom(100_000 + i))
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        done = bench_run(mnt, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"diskinfo: error: {mnt}: not writable, and no file of at least 64 MiB in it to read "
        "instead (its largest is 97.7 KiB); pass a large file on the same disk\n"
    )
