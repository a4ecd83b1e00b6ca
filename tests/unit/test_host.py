"""Host figures: /proc/stat deltas, page cache vs. dataset, /dev/shm, on captured fixtures."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo.collectors.host import (
    CpuTimes,
    HostCollector,
    cpu_percent,
    memory_figures,
    parse_meminfo,
    parse_proc_stat,
    shm_size_mb,
    tree_size,
)
from diskinfo.record import IntervalRecord

FIX = Path(__file__).parent.parent / "fixtures" / "host"

STAT_A = (
    "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\ncpu1 50 0 25 400 25 0 0 0 0 0\n"
)
STAT_B = (
    "cpu  160 0 70 880 90 0 0 0 0 0\ncpu0 80 0 35 440 45 0 0 0 0 0\ncpu1 80 0 35 440 45 0 0 0 0 0\n"
)


def test_busy_and_iowait_from_deltas():
    a, n = parse_proc_stat(STAT_A)
    b, _ = parse_proc_stat(STAT_B)
    assert n == 2
    busy, iowait = cpu_percent(a, b)  # total delta 200: busy 80, idle 80, iowait 40
    assert busy == pytest.approx(40.0) and iowait == pytest.approx(20.0)


def test_captured_proc_stat_parses():
    a, n = parse_proc_stat((FIX / "proc_stat.1").read_text())
    b, _ = parse_proc_stat((FIX / "proc_stat.2").read_text())
    assert n == 2 and b.total > a.total
    busy, iowait = cpu_percent(a, b)
    assert 0 <= busy <= 100 and 0 <= iowait <= 100


def test_counters_going_down_never_give_negative_time():
    a, _ = parse_proc_stat(STAT_B)
    b, _ = parse_proc_stat(STAT_A)
    assert cpu_percent(a, b) == (0.0, 0.0)


@pytest.mark.parametrize("text", ["", "intr 1 2 3\n", "cpu  x y z\n", "cpu 1 2\n"])
def test_bad_proc_stat_is_a_value_error(text):
    with pytest.raises(ValueError):
        parse_proc_stat(text)


@given(st.text(max_size=300))
def test_proc_stat_parser_fuzz(text):
    with contextlib.suppress(ValueError):
        parse_proc_stat(text)


@given(st.lists(st.integers(0, 2**63), min_size=16, max_size=16))
def test_cpu_percent_bounded(values):
    busy, iowait = cpu_percent(CpuTimes(*values[:8]), CpuTimes(*values[8:]))
    assert 0.0 <= busy <= 100.0 and 0.0 <= iowait <= 100.0


def test_page_cache_excludes_shmem():
    info = parse_meminfo(
        "MemTotal: 1048576 kB\nMemAvailable: 524288 kB\nBuffers: 1024 kB\n"
        "Cached: 204800 kB\nShmem: 102400 kB\ngarbage line\n"
    )
    cache, total, available = memory_figures(info)
    assert cache == pytest.approx(101.0) and total == 1024.0 and available == 512.0


def test_captured_meminfo():
    cache, total, available = memory_figures(parse_meminfo((FIX / "meminfo").read_text()))
    assert 0 < cache < total and 0 < available <= total


def test_tree_size_counts_files_once_and_stops_at_the_cap(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.bin").write_bytes(b"1" * 1000)
    (tmp_path / "a" / "y.bin").write_bytes(b"1" * 24)
    (tmp_path / "link").symlink_to(tmp_path / "a")  # not followed: no double count
    (tmp_path / "hard").hardlink_to(tmp_path / "a" / "x.bin")
    assert tree_size([str(tmp_path), str(tmp_path / "a")]) == (1024, True)
    assert tree_size([str(tmp_path)], max_entries=1)[1] is False


def test_shm_size():
    assert shm_size_mb("/dev/shm") > 0
    assert shm_size_mb("/does/not/exist") is None


def test_collector_on_fixtures_and_a_real_dataset(tmp_path):
    (tmp_path / "d.bin").write_bytes(b"0" * 2**20 * 3)
    texts = iter([(FIX / "proc_stat.1").read_text(), (FIX / "proc_stat.2").read_text()])

    def read(path):
        return next(texts) if path == "/proc/stat" else (FIX / "meminfo").read_text()

    collector = HostCollector([str(tmp_path)], read=read)
    collector.start()
    for _ in range(100):  # the dataset walk runs in the background
        if collector._dataset_mb is not None:
            break
        import time

        time.sleep(0.02)
    record = IntervalRecord(ts=0, elapsed_s=1.0)
    collector.fill(record)
    h = record.cpu
    assert h.cpu_count == 2 and 0 <= h.cpu_busy <= 100
    assert h.dataset_mb == pytest.approx(3.0) and h.mem_total_mb > 20000
    assert h.shm_total_mb is not None and not record.warnings


def test_collector_warns_on_unreadable_proc_and_keeps_going():
    def read(path):
        raise PermissionError(13, "Permission denied", path)

    collector = HostCollector(read=read)
    collector.start()
    record = IntervalRecord(ts=0, elapsed_s=1.0)
    collector.fill(record)
    assert record.cpu is not None and len(record.warnings) == 2


def test_tree_size_counts_hard_links_once_and_overlapping_roots_once(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_bytes(b"x" * 100)
    os.link(tmp_path / "d" / "x", tmp_path / "d" / "y")
    (tmp_path / "z").write_bytes(b"z" * 10)
    assert tree_size([str(tmp_path), str(tmp_path / "d"), str(tmp_path / "z")]) == (110, True)


def test_meminfo_with_keys_is_the_full_parse_restricted_to_them():
    from diskinfo.collectors.host import MEMINFO_KEYS

    text = (FIX / "meminfo").read_text()
    full = parse_meminfo(text)
    assert parse_meminfo(text, MEMINFO_KEYS) == {k: v for k, v in full.items() if k in MEMINFO_KEYS}
