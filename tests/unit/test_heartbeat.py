"""The monitor's heartbeat: touched every TOUCH_S while sampling, one owner, gone on exit."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from diskinfo.record import IntervalRecord
from diskinfo.sinks.heartbeat import TOUCH_S, HeartbeatSink, heartbeat_path, read
from tests.helpers.net import wait_until

RECORD = IntervalRecord(ts=0.0, elapsed_s=1.0)


def beat_each_sample() -> Callable[[], float]:
    """A clock that moves TOUCH_S per call: every write is due for a beat."""
    now = [0.0]

    def clock() -> float:
        now[0] += TOUCH_S
        return now[0]

    return clock


def test_default_path_follows_the_state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DISKINFO_STATE_DIR", str(tmp_path))
    assert heartbeat_path() == tmp_path / "heartbeat"


def test_written_at_the_first_sample_then_touched_every_touch_s(tmp_path):
    path = tmp_path / "state" / "heartbeat"
    now = [100.0]
    beat = HeartbeatSink(2.5, path, command=["diskinfo", "watch", "/data"], clock=lambda: now[0])
    assert not path.exists()  # nothing before the first sample: no false "alive"
    beat.write(RECORD)
    info = read(path)
    assert info["pid"] == str(os.getpid()) and info["interval_s"] == "2.5"
    assert info["command"] == "diskinfo watch /data"
    old = time.time() - 100
    os.utime(path, (old, old))
    now[0] += TOUCH_S - 0.5
    beat.write(RECORD)  # a sample within TOUCH_S of the last beat: no syscall
    assert abs(path.stat().st_mtime - old) < 1
    now[0] += 0.5
    beat.write(RECORD)
    assert time.time() - path.stat().st_mtime < 5
    beat.close()
    assert not path.exists()  # a clean exit leaves no heartbeat that could look alive


def test_another_live_monitors_heartbeat_is_left_alone(tmp_path):
    path = tmp_path / "heartbeat"
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "diskinfo"])
    cmdline = Path(f"/proc/{other.pid}/cmdline")
    # until exec: a forked child still shows pytest's command line
    wait_until(lambda: b"diskinfo" in cmdline.read_bytes(), 10, "the child never ran", step=0.01)
    try:
        path.write_text(f"pid={other.pid}\ninterval_s=5\n")
        old = time.time() - 100
        os.utime(path, (old, old))
        mine = HeartbeatSink(1.0, path, clock=beat_each_sample())
        mine.write(RECORD)
        assert read(path)["pid"] == str(other.pid) and abs(path.stat().st_mtime - old) < 1
        mine.close()
        assert path.exists()  # not ours to remove
    finally:
        other.kill()
        other.wait()
    mine.write(RECORD)  # its owner is gone: the heartbeat is ours now
    assert read(path)["pid"] == str(os.getpid())
    mine.close()


def test_a_dead_monitors_pid_reused_by_another_program_does_not_keep_the_file(tmp_path):
    path = tmp_path / "heartbeat"
    stranger = subprocess.Popen(["sleep", "60"])  # alive, but not a monitor
    try:
        path.write_text(f"pid={stranger.pid}\ninterval_s=5\n")
        beat = HeartbeatSink(1.0, path)
        beat.write(RECORD)
        assert read(path)["pid"] == str(os.getpid())
        beat.close()
    finally:
        stranger.kill()
        stranger.wait()


def test_a_removed_heartbeat_is_written_again(tmp_path):
    path = tmp_path / "heartbeat"
    beat = HeartbeatSink(1.0, path, clock=beat_each_sample())
    beat.write(RECORD)
    path.unlink()
    beat.write(RECORD)
    assert read(path)["pid"] == str(os.getpid())
    beat.close()


def test_an_unwritable_state_dir_is_said_once_and_never_raises(tmp_path):
    blocker = tmp_path / "state"
    blocker.write_text("a file where the directory should be")
    err = io.StringIO()
    beat = HeartbeatSink(1.0, blocker / "heartbeat", stderr=err, clock=beat_each_sample())
    for _ in range(5):
        beat.write(RECORD)
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and "cannot write the heartbeat" in lines[0], lines
    assert lines[0].startswith("diskinfo: warning: ")
    beat.close()


def test_the_monitor_beats_while_sampling_and_not_while_stopped(tmp_path):
    path = tmp_path / "state" / "heartbeat"
    proc = subprocess.Popen(
        [sys.executable, "-m", "diskinfo.cli", "watch", str(tmp_path), "--interval", "0.2",
         "--log-dir", str(tmp_path / "logs"), "--echo", "never"],
        env={**os.environ, "DISKINFO_STATE_DIR": str(path.parent)},
    )  # fmt: skip
    try:
        wait_until(lambda: read(path).get("pid") == str(proc.pid), 20, "no heartbeat")
        first = path.stat().st_mtime
        wait_until(lambda: path.stat().st_mtime > first, TOUCH_S + 5, "heartbeat not touched")
        proc.send_signal(signal.SIGSTOP)
        stopped = path.stat().st_mtime
        time.sleep(TOUCH_S + 1)
        assert path.stat().st_mtime == stopped  # stopped: no beat, the age grows
        assert time.time() - stopped > TOUCH_S
        proc.send_signal(signal.SIGCONT)
        wait_until(lambda: time.time() - path.stat().st_mtime < 1, 5, "no beat after SIGCONT")
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    assert proc.returncode == 0 and not path.exists()
