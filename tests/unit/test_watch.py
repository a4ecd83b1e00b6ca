"""The disk collector over changing /proc/diskstats snapshots, and `diskinfo watch` itself."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from diskinfo.cli import build_parser, main
from diskinfo.collectors.disk import DiskCollector
from diskinfo.collectors.watched import WatchedPaths
from diskinfo.commands.watch import build_monitor, say_unmeasurable
from diskinfo.record import SCHEMA, IntervalRecord
from diskinfo.sinks.jsonl import JsonlSink
from diskinfo.sinks.textlog import TextLogSink
from diskinfo.sources import diskstats
from tests.helpers.fixtures import resolver

LINE = "   8       1 sda1 {r} 0 {s} {t} 0 0 0 0 0 {io} {io} 0 0 0 0 0 0"
DISK = "   8       0 sda {r} 0 {s} {t} 0 0 0 0 0 {io} {io} 0 0 0 0 0 0"


def snap(r, s, t, io, *, disk=True, part=True, extra=""):
    lines = []
    if disk:
        lines.append(DISK.format(r=r, s=s, t=t, io=io))
    if part:
        lines.append(LINE.format(r=r, s=s, t=t, io=io))
    return "\n".join(lines) + "\n" + extra


class Feed:
    def __init__(self, texts, dt=1.0):
        self.texts, self.t, self.dt = list(texts), 0.0, dt

    def read(self):
        item = self.texts.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    def clock(self):
        self.t += self.dt
        return self.t


def collector(feed: Feed) -> DiskCollector:
    r = resolver("nvme-partitions")
    watched = WatchedPaths(["/workspace/data"], resolver=lambda: r)
    c = DiskCollector(watched, read=feed.read, clock=feed.clock)
    c.start()
    return c


def fill(c):
    rec = IntervalRecord(ts=time.time(), elapsed_s=1.0)
    c.fill(rec)
    return rec


def test_figures_for_partition_and_whole_disk_with_paths():
    feed = Feed([snap(0, 0, 0, 0), snap(100, 25600, 200, 500)])
    c = collector(feed)
    assert c.watched.devices == {"sda1": ["/workspace/data"], "sda": ["/workspace/data"]}
    rec = fill(c)
    assert [d.device for d in rec.devices] == ["sda1", "sda"]
    d = rec.devices[0]
    assert (d.r_s, d.rmb_s, d.r_await, d.util) == (100.0, 12.5, 2.0, 50.0)
    assert d.paths == ["/workspace/data"] and d.counters["rd_ios"] == 100
    assert d.read_bytes == 25600 * 512 and not rec.warnings


def test_device_that_disappears_and_comes_back_reset():
    feed = Feed(
        [
            snap(0, 0, 0, 0),
            snap(10, 80, 5, 5),
            snap(20, 160, 10, 10, part=False),  # sda1 gone
            snap(3, 24, 1, 1),  # back, counters restarted
            snap(13, 104, 6, 6),
        ]
    )
    c = collector(feed)
    assert len(fill(c).devices) == 2
    gone = fill(c)
    assert [d.device for d in gone.devices] == ["sda"]
    assert any("sda1 is not in /proc/diskstats" in w for w in gone.warnings)
    back = fill(c)
    assert not back.devices  # sda's counters went back too: both start a new baseline
    assert any("sda1 appeared" in w for w in back.warnings)
    assert any("counters of sda went back" in w for w in back.warnings)
    again = fill(c)
    assert {d.device: d.r_s for d in again.devices} == {"sda1": 10.0, "sda": 10.0}


def test_counters_that_go_back_are_a_reset_not_a_negative_rate():
    feed = Feed([snap(5000, 40000, 100, 100), snap(10, 80, 1, 1), snap(20, 160, 2, 2)])
    c = collector(feed)
    rec = fill(c)
    assert not rec.devices and any("went back" in w for w in rec.warnings)
    assert {d.r_s for d in fill(c).devices} == {10.0}


def test_unreadable_and_malformed_diskstats_are_warnings():
    feed = Feed(
        [
            snap(0, 0, 0, 0),
            PermissionError(13, "Permission denied"),
            # a watched device's line cut short: that device waits, the others are read
            snap(20, 160, 2, 2, part=False, extra="   8       1 sda1 20 0 160\n"),
        ]
    )
    c = collector(feed)
    bad = fill(c)
    assert not bad.devices and "cannot read /proc/diskstats" in bad.warnings[0]
    rec = fill(c)
    # the unreadable interval is folded into the next: 20 reads over 2 s
    assert {(d.device, d.r_s) for d in rec.devices} == {("sda", 10.0)}
    assert any("malformed" in w and "sda1" in w for w in rec.warnings)


def test_elapsed_time_is_measured_not_nominal():
    feed = Feed([snap(0, 0, 0, 0), snap(150, 0, 0, 0)], dt=1.5)  # overslept: 1.5 s
    assert {d.r_s for d in fill(collector(feed)).devices} == {100.0}


def test_our_parser_agrees_with_psutil_where_psutil_has_the_figure():
    ours, _ = diskstats.parse(diskstats.read())
    theirs = psutil.disk_io_counters(perdisk=True, nowrap=False)
    for name, p in theirs.items():
        c = ours[name]
        # psutil reads the file a moment later: allow for I/O in between
        assert 0 <= p.read_count - c.rd_ios <= 50 and 0 <= p.write_count - c.wr_ios <= 500
        assert p.read_bytes >= c.rd_sectors * 512 and p.busy_time >= c.io_ticks


def run_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("interval", ["0", "-1", "abc"])
def test_bad_interval_is_a_clear_error(interval):
    p = run_cli("watch", "/", "--interval", interval)
    assert p.returncode == 2 and "--interval" in p.stderr and "Traceback" not in p.stderr


def test_nonexistent_path_one_line_exit_2():
    for cmd in ("watch", "resolve"):
        p = run_cli(cmd, "/no/such/dir")
        assert p.returncode == 2 and p.stderr.strip().count("\n") == 0
        assert p.stderr.startswith("diskinfo: error: no such file or directory")


def test_build_monitor_wires_disk_collector_and_both_sinks(tmp_path):
    args = build_parser().parse_args(["watch", "/", "--log-dir", str(tmp_path), "--count", "1"])
    with contextlib.ExitStack() as held:
        mon = build_monitor(args, held)
        assert isinstance(mon.collectors[0], DiskCollector)
        assert {type(s) for s in mon.sinks} >= {TextLogSink, JsonlSink}
        assert mon.run() == 0
    rec = IntervalRecord.from_dict(json.loads((tmp_path / "diskinfo.jsonl").read_text()))
    assert rec.schema == SCHEMA and rec.devices and rec.devices[0].paths == ["/"]


def test_watch_writes_both_logs_and_sigterm_flushes_and_exits_0(tmp_path):
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "diskinfo.cli",
            "watch",
            "/",
            "/dev/shm",
            "--interval",
            "0.2",
            "--log-dir",
            str(tmp_path),
            "--echo",
            "always",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    jsonl = tmp_path / "diskinfo.jsonl"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not jsonl.exists() or jsonl.read_text().count("\n") < 3):
        time.sleep(0.1)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0, err
    assert "memory-backed" in err  # /dev/shm explained once
    lines = jsonl.read_text().splitlines()
    assert len(lines) >= 3 and all(json.loads(x)["schema"] == SCHEMA for x in lines)
    recs = [json.loads(x) for x in lines]
    assert all(abs(r["elapsed_s"] - 0.2) < 0.15 for r in recs)
    log = (tmp_path / "diskinfo.log").read_text()
    assert log.count("[DiskIO] ") >= len(lines) and "Read=" in log and "util=" in log
    assert "[DiskIO]" in out
    assert not (tmp_path / "diskinfo.log").read_text().endswith("\\")  # whole lines only
    assert os.path.getsize(jsonl) == len("\n".join(lines)) + 1


def test_sampling_does_not_drift(tmp_path):
    p = run_cli("watch", "/", "--interval", "0.1", "--count", "20", "--log-dir", str(tmp_path))
    assert p.returncode == 0, p.stderr
    recs = [json.loads(x) for x in (tmp_path / "diskinfo.jsonl").read_text().splitlines()]
    assert len(recs) == 20
    # absolute deadlines: 19 intervals after the first sample take 1.9 s, whatever the
    # work per sample and the wake-up latency; rates use each interval's measured length
    span = recs[-1]["ts"] - recs[0]["ts"]
    assert abs(span - 1.9) < 0.05, span
    assert abs(sum(r["elapsed_s"] for r in recs[1:]) - span) < 0.02


def test_stdout_echo_is_off_by_default_when_stdout_is_not_a_terminal(tmp_path):
    p = run_cli("watch", "/", "--interval", "0.1", "--count", "2", "--log-dir", str(tmp_path))
    assert p.returncode == 0 and "[DiskIO]" not in p.stdout
    assert (tmp_path / "diskinfo.log").read_text().count("[DiskIO] ") >= 2


def test_main_turns_user_error_into_exit_2(capsys):
    assert main(["resolve", "/no/such/x"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_what_cannot_be_measured_is_said_once_for_the_paths_it_holds_alike(capsys):
    overlay = "overlay (container root): the upper layer is a host path not visible here"
    res = [
        SimpleNamespace(path="/workspace/data", measurable=True, inferred=True, note=overlay),
        SimpleNamespace(path="/workspace", measurable=True, inferred=True, note=overlay),
        SimpleNamespace(path="/proc", measurable=False, inferred=False, note="pseudo-filesystem"),
        SimpleNamespace(path="/data", measurable=True, inferred=False, note=""),
    ]
    out = io.StringIO()
    say_unmeasurable(SimpleNamespace(resolutions=res), out)  # type: ignore[arg-type]
    said = [
        f"diskinfo: /workspace/data, /workspace: {overlay}",
        "diskinfo: /proc: pseudo-filesystem",
    ]
    assert out.getvalue().splitlines() == said
    # without a stream: the stderr of the moment (`diskinfo watch`'s own, or a redirected one)
    say_unmeasurable(SimpleNamespace(resolutions=res))  # type: ignore[arg-type]
    assert capsys.readouterr().err.splitlines() == said


def test_a_monitor_that_fails_to_build_releases_the_log_folders_lock(tmp_path, monkeypatch):
    """The lock's lifetime is the ExitStack's in watch.run: a failure after the lock was taken
    releases it at once, not whenever the garbage collector gets to it."""
    from diskinfo.commands import watch
    from diskinfo.logdir_lock import LogDirLock

    def broken(*args, **kwargs):
        raise RuntimeError("a sink that cannot start")

    monkeypatch.setattr(watch, "JsonlSink", broken)
    args = build_parser().parse_args(["watch", "/", "--log-dir", str(tmp_path), "--count", "1"])
    with pytest.raises(RuntimeError) as failed:
        watch.run(args)
    assert failed.value  # the traceback, and the frames in it, are still alive here
    LogDirLock(str(tmp_path)).close()  # taken again: the failed monitor released it
