"""One monitor per log directory: real `diskinfo watch` processes on one directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diskinfo.errors import UserError
from diskinfo.logdir_lock import FILENAME, LogDirLock
from tests.helpers.net import wait_until


def watch(tmp: Path, logs: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "diskinfo.cli", "watch", str(tmp), "--interval", "0.2",
            "--log-dir", str(logs), "--echo", "never", *extra]  # fmt: skip


def env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "DISKINFO_STATE_DIR": str(tmp / "state")}


def holder_written(logs: Path, pid: int) -> bool:
    return f"pid={pid}\n" in (logs / FILENAME).read_text()


def test_a_second_monitor_refuses_with_one_line_naming_the_first(tmp_path):
    logs = tmp_path / "logs"
    first = subprocess.Popen(watch(tmp_path, logs), env=env(tmp_path), stderr=subprocess.PIPE)
    try:
        wait_until(lambda: holder_written(logs, first.pid), 20, "the first monitor never locked")
        wait_until(lambda: (logs / "diskinfo.jsonl").exists(), 20, "no records from the first")
        second = subprocess.run(
            watch(tmp_path, logs, "--count", "3"),
            env=env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        line = second.stderr
        assert second.returncode == 1
        assert line.count("\n") == 1 and line.startswith("diskinfo: error: "), line
        assert f"pid {first.pid}" in line and "diskinfo.cli watch" in line, line
        assert str(logs) in line and "--log-dir" in line
        assert first.poll() is None  # the first goes on
        records = (logs / "diskinfo.jsonl").read_text().splitlines()
        time.sleep(0.5)
        assert len((logs / "diskinfo.jsonl").read_text().splitlines()) > len(records)
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(20)
    assert first.returncode == 0


def test_a_killed_monitors_lock_file_does_not_block_the_next(tmp_path):
    logs = tmp_path / "logs"
    crashed = subprocess.Popen(watch(tmp_path, logs), env=env(tmp_path))
    wait_until(lambda: holder_written(logs, crashed.pid), 20, "the monitor never locked")
    crashed.kill()  # SIGKILL: no clean-up at all
    crashed.wait(10)
    assert holder_written(logs, crashed.pid)  # the stale file is still there
    nxt = subprocess.run(
        watch(tmp_path, logs, "--count", "2"), env=env(tmp_path), capture_output=True, timeout=60
    )
    assert nxt.returncode == 0, nxt.stderr
    assert f"pid={crashed.pid}\n" not in (logs / FILENAME).read_text()


def test_the_lock_is_released_by_close_and_held_until_then(tmp_path):
    lock = LogDirLock(str(tmp_path))
    assert lock.held
    with pytest.raises(UserError) as err:
        LogDirLock(str(tmp_path))  # flock: another open file description conflicts
    assert err.value.exit_code == 1 and f"pid {os.getpid()}" in str(err.value)
    lock.close()
    again = LogDirLock(str(tmp_path))
    assert again.held
    again.close()


def test_a_symlink_in_place_of_the_lock_file_is_not_followed(tmp_path, capsys):
    target = tmp_path / "elsewhere"
    target.write_text("keep\n")
    (tmp_path / FILENAME).symlink_to(target)
    lock = LogDirLock(str(tmp_path))
    assert not lock.held and target.read_text() == "keep\n"
    assert "cannot lock" in capsys.readouterr().err
