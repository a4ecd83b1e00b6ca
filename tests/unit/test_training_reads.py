"""The verdict judges the training's own reads: another program's reads on the same disk
(an apt-get) drive no disk rule, and data read from a folder no watched path covers is said
once and sizes no fix (the preload fix's dataset size is the watched paths')."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from diskinfo.analyse import signals as sig
from diskinfo.analyse.verdict import decide
from diskinfo.collectors import datafiles
from diskinfo.collectors.procs import ProcsCollector
from diskinfo.record import (
    DeviceFigures,
    HostFigures,
    IntervalRecord,
    LoaderFigures,
    ProcessIO,
)


def record(training_mb_s: float, unwatched: list[str] | None = None) -> IntervalRecord:
    """A loop that waits 40% of its time, no workers, its process at half a core, while the
    disk does small random reads (16 kB, one in flight) and the dataset fits in memory."""
    return IntervalRecord(
        ts=time.time(),
        elapsed_s=5.0,
        devices=[
            DeviceFigures(
                device="vda", r_s=300, rmb_s=4.8, rareq_sz=16, r_await=0.5, aqu_sz=0.3, util=40
            )
        ],
        cpu=HostFigures(
            cpu_count=2, cpu_busy=30, mem_available_mb=8000, page_cache_mb=100, dataset_mb=0.01
        ),
        # read() 6 MB/s (rchar): from storage, or the page cache for what read_bytes lacks
        procs=[
            ProcessIO(pid=7, name="python", role="main", read_mb_s=training_mb_s, rchar_mb_s=6.0)
        ],
        loader=LoaderFigures(
            batches=50, wait_s=2.0, step_s=3.0, wait_share=0.4, processes=1, num_workers=0
        ),
        unwatched_data=unwatched or [],
    )


def test_another_programs_small_reads_are_not_the_trainings():
    ours = decide(record(training_mb_s=4.5), {})
    assert ours.cause == "small-files", ours
    theirs = decide(record(training_mb_s=0.1), {})  # an apt-get reads, the training does not
    assert theirs.cause != "small-files" and "random reads" not in theirs.verdict, theirs


def test_unknown_reads_are_not_taken_for_none():
    """/proc/PID/io unreadable (another uid's process): both counters 0, the disk's reads may
    be the training's, and the disk rules judge them as before."""
    unknown = record(training_mb_s=0.0)
    unknown.procs[0].rchar_mb_s = 0.0
    assert decide(unknown, {}).cause == "small-files"


def test_data_outside_the_watched_paths_sizes_no_preload():
    watched = sig.signals(record(training_mb_s=4.5), {})
    assert watched.fits  # the watched paths' 10 kB "dataset" fits in memory
    demo = sig.signals(record(training_mb_s=4.5, unwatched=["/tmp/diskinfo-demo-x"]), {})
    assert not demo.fits
    assert not any("preload" in f for f in decide(record(4.5, ["/tmp/d"]), {}).fixes)


def test_the_folders_of_open_data_files_outside_the_watched_paths():
    files = [
        "/tmp/diskinfo-demo-x/class1/0001.bin",
        "/workspace/data/train/0002.jpg",
        "/opt/user-venv/lib/python3.11/site-packages/numpy/core/x.so",
        "/home/jovyan/.cache/torch/kernels/a.bin",
        f"{sys.prefix}/share/thing.dat",
        "/proc/self/status",
    ]
    assert datafiles.unwatched_folders(files, ["/workspace/data", "/workspace"]) == {
        "/tmp/diskinfo-demo-x"
    }


def test_the_collector_finds_a_real_process_reading_outside_and_says_it_once(tmp_path: Path):
    data = tmp_path / "elsewhere" / "set"
    data.mkdir(parents=True)
    (data / "0001.bin").write_bytes(b"x" * 4096)
    reader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"f = open({str(data / '0001.bin')!r}, 'rb'); import time; "
            "print('open', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        pid_file = tmp_path / "train.pid"
        pid_file.write_text(f"{reader.pid}\n")
        collector = ProcsCollector(str(pid_file), tmp_path / "state", watched=["/workspace"])
        collector.start()
        first, second = IntervalRecord(ts=0, elapsed_s=1.0), IntervalRecord(ts=1, elapsed_s=1.0)
        collector.fill(first)
        collector.fill(second)
        assert first.unwatched_data and first.unwatched_data == second.unwatched_data
        assert all(str(data).startswith(folder) for folder in first.unwatched_data)
        said = [w for w in first.warnings + second.warnings if "no watched path" in w]
        assert len(said) == 1 and "(/workspace) covers" in said[0], said
    finally:
        reader.kill()
        reader.wait()
