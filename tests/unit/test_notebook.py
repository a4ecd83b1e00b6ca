"""The verdict a notebook shows: the monitor's verdict file and the rows built from it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from diskinfo import notebook
from diskinfo.record import HostFigures, IntervalRecord, LoaderFigures, ProcessIO, Verdict
from diskinfo.sinks.verdict_file import SCHEMA, VerdictFileSink, read, verdict_path


def record() -> IntervalRecord:
    return IntervalRecord(
        ts=time.time(),
        elapsed_s=5.0,
        cpu=HostFigures(cpu_count=2, cgroup_cpu_allowed=2.0),
        procs=[ProcessIO(pid=7, name="python", role="main", cpu_percent=150.0)],
        loader=LoaderFigures(batches=50, wait_share=0.46, batches_s=10.0, processes=1),
        verdict=Verdict(
            verdict="input-bound: cpu",
            summary="loading and the step take turns in the training process",
            fixes=["num_workers 0 -> 2", "pin_memory"],
            cause="no-workers",
            held_s=30.0,
        ),
    )


def test_the_sink_writes_what_the_display_shows_and_takes_it_away_at_the_end(tmp_path):
    sink = VerdictFileSink(tmp_path)
    sink.write(record())
    path = verdict_path(tmp_path)
    assert path.parent != tmp_path  # a rename in the state directory would relist loader files
    doc = read(path)
    assert doc is not None and doc["schema"] == SCHEMA and doc["pid"] == os.getpid()
    assert doc["main_cores"] == 1.5 and doc["fix"] == "num_workers 0 -> 2"
    rows = dict(notebook.lines(doc, time.time(), path))
    assert rows["verdict"] == "input-bound: cpu (held 30 s)"
    assert rows["data-wait now"] == "46% of step time in the last 5 s"
    assert rows["why"] == "loading and the step take turns in the training process"
    assert rows["cpu"] == "training process 1.5 cores (of 2); 10.0 batches/s"
    assert rows["try"] == "num_workers 0 -> 2"
    sink.close()
    assert not path.exists() and read(path) is None


def test_a_held_verdict_beside_another_intervals_data_wait_says_which_is_which(tmp_path):
    """The verdict holds while a single interval decides otherwise: its summary quotes the
    figures of an earlier interval, the data-wait row this one's; each row says so."""
    held = record()
    held.loader = LoaderFigures(batches=50, wait_share=0.09, batches_s=10.0, processes=1)
    held.verdict.summary = "data-wait 15% of step time"
    held.verdict.interval_verdict = "compute-bound"
    sink = VerdictFileSink(tmp_path)
    sink.write(held)
    rows = dict(notebook.lines(read(verdict_path(tmp_path)), time.time(), tmp_path))
    assert rows["why"] == (
        "data-wait 15% of step time (figures of the latest interval judged input-bound: cpu)"
    )
    assert rows["data-wait now"] == (
        "9% of step time in the last 5 s; that interval alone: compute-bound"
    )
    sink.close()


def test_no_monitor_and_a_stopped_one_are_said_not_shown_as_live(tmp_path):
    path = verdict_path(tmp_path)
    assert "waiting for the monitor's first verdict" in notebook.lines(None, 0, path)[0][1]
    doc = {"schema": SCHEMA, "ts": 100.0, "interval_s": 5.0, "verdict": "idle"}
    assert notebook.lines(doc, 200.0, path) == [
        ("diskinfo", "no verdict from the monitor for 100 s (docker logs says why)")
    ]
    path.parent.mkdir()
    path.write_text(json.dumps({"schema": "other"}))
    assert read(path) is None
    # the state directory is the training user's: a planted FIFO never blocks the display's
    # thread, and a field of the wrong type is no document
    path.unlink()
    os.mkfifo(path)
    assert read(path) is None
    path.unlink()
    path.write_text(json.dumps({"schema": SCHEMA, "ts": "soon", "verdict": "idle"}))
    assert read(path) is None


def test_an_unwritable_state_dir_is_said_once_and_never_raises(tmp_path, capsys):
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the directory should be
    sink = VerdictFileSink(blocked)
    for _ in range(3):
        sink.write(record())
    assert capsys.readouterr().err.count("cannot write") == 1


def test_outside_a_kernel_nothing_is_shown_and_no_thread_starts():
    """A script (or an SSH shell, or IPython in a terminal) gets no display: the wrapper
    iterates as before, and `DISKINFO_NOTEBOOK=0` keeps a kernel quiet too."""
    script = (
        "import threading, diskinfo.torch, diskinfo.notebook as nb\n"
        "assert list(diskinfo.torch.watch(range(3), notebook=True)) == [0, 1, 2]\n"
        "assert nb.display_for(None) is None\n"
        "assert 'diskinfo-notebook' not in [t.name for t in threading.enumerate()]\n"
        "assert not nb.enabled_by_env({'DISKINFO_NOTEBOOK': '0'})\n"
        "assert nb.enabled_by_env({})\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        timeout=60,
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_no_watched_loader_no_file(tmp_path):
    """Its readers are the processes that publish loader figures: with none, the sink writes
    nothing (0.35 ms a sample saved) and takes away what it wrote for an earlier loop."""
    sink = VerdictFileSink(tmp_path)
    path = verdict_path(tmp_path)
    sink.write(record())
    assert read(path) is not None
    quiet = record()
    quiet.loader = None
    sink.write(quiet)
    assert not path.exists()
    sink.write(quiet)
    assert not path.exists()
    quiet.wrapped_not_iterated = 1  # wrapped, not yet iterated: a display waits for it
    sink.write(quiet)
    assert read(path) is not None
