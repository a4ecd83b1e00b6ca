"""Host figures: /proc/stat deltas, page cache vs. dataset, /dev/shm, on captured fixtures."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo.collectors.host import HostCollector, tree_size
from diskinfo.record import IntervalRecord
from diskinfo.sources.meminfo import memory_figures, parse_meminfo
from diskinfo.sources.procstat import CpuTimes, cpu_percent, parse_proc_stat

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
    (tmp_path / "link").symlink_to(tmp_path / "a")  # the same directory: counted once
    (tmp_path / "hard").hardlink_to(tmp_path / "a" / "x.bin")
    assert tree_size([str(tmp_path), str(tmp_path / "a")]) == (1024, True)
    assert tree_size([str(tmp_path)], max_entries=1)[1] is False


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


def test_tree_size_follows_linked_directories_once_and_never_loops(tmp_path):
    """A dataset assembled from links to class directories elsewhere is read through them
    (ImageFolder and pack follow them): its size must count them, once, without looping."""
    data, store = tmp_path / "data", tmp_path / "store"
    (store / "bird").mkdir(parents=True)
    (store / "bird" / "0.jpg").write_bytes(b"b" * 4000)
    (data / "cat").mkdir(parents=True)
    (data / "cat" / "0.jpg").write_bytes(b"c" * 300)
    (data / "bird").symlink_to(store / "bird")
    (data / "bird2").symlink_to(store / "bird")  # the same directory twice
    (data / "cat" / "up").symlink_to(data)  # a loop
    (data / "cat" / "one.jpg").symlink_to(store / "bird" / "0.jpg")  # its folder is walked
    (data / "gone").symlink_to(tmp_path / "nowhere")
    assert tree_size([str(data)]) == (4300, True)


def test_tree_size_counts_linked_files_once_as_a_hugging_face_snapshot_holds_them(tmp_path):
    """A hub snapshot's files are links into blobs/: the data is all behind links. Counted
    0 bytes, a 'dataset' of gigabytes 'fit in RAM' and the verdict advised preloading it."""
    repo = tmp_path / "datasets--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "data").mkdir(parents=True)
    for i, n in enumerate((5000, 7000)):
        (repo / "blobs" / f"sha{i}").write_bytes(b"x" * n)
        link = repo / "snapshots" / "abc123" / "data" / f"train-{i}.parquet"
        link.symlink_to(Path("../../../blobs") / f"sha{i}")  # relative, as the hub makes them
    snapshot = repo / "snapshots" / "abc123"
    (snapshot / "again.parquet").symlink_to(repo / "blobs" / "sha0")  # the same blob twice
    (snapshot / "README.md").write_bytes(b"r" * 100)
    (snapshot / "gone.parquet").symlink_to(repo / "blobs" / "missing")
    assert tree_size([str(snapshot)]) == (12100, True)
    # the whole repository watched: the blobs are walked, their links add nothing
    assert tree_size([str(repo)]) == (12100, True)
    assert tree_size([str(snapshot), str(repo / "blobs")]) == (12100, True)


def test_tree_size_counts_hard_links_once_and_overlapping_roots_once(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_bytes(b"x" * 100)
    os.link(tmp_path / "d" / "x", tmp_path / "d" / "y")
    (tmp_path / "z").write_bytes(b"z" * 10)
    assert tree_size([str(tmp_path), str(tmp_path / "d"), str(tmp_path / "z")]) == (110, True)


def test_meminfo_with_keys_is_the_full_parse_restricted_to_them():
    from diskinfo.sources.meminfo import MEMINFO_KEYS

    text = (FIX / "meminfo").read_text()
    full = parse_meminfo(text)
    assert parse_meminfo(text, MEMINFO_KEYS) == {k: v for k, v in full.items() if k in MEMINFO_KEYS}


# --- the container's own cgroup CPU (sources/cgroup_cpu.py) ---


def test_cgroup_cpu_quota_files_parse():
    from diskinfo.sources import ParseError
    from diskinfo.sources.cgroup_cpu import parse_cpu_max, parse_keyed, parse_v1_quota

    assert parse_cpu_max("max 100000\n") is None
    assert parse_cpu_max("150000 100000\n") == 1.5
    assert parse_v1_quota("-1\n", "100000\n") is None
    assert parse_v1_quota("200000\n", "100000\n") == 2.0
    assert parse_keyed("usage_usec 5\nnr_periods 2\n", "cpu.stat") == {
        "usage_usec": 5,
        "nr_periods": 2,
    }
    for bad in ("x 100000", "1 2 3", ""):
        with pytest.raises(ParseError):
            parse_cpu_max(bad)
    with pytest.raises(ParseError):
        parse_keyed("usage_usec lots\n", "cpu.stat")


def _v2_dir(path: Path, usage_usec: int, throttled: int, quota: str) -> None:
    path.mkdir(exist_ok=True)
    (path / "cpu.stat").write_text(
        f"usage_usec {usage_usec}\nuser_usec 1\nsystem_usec 1\nnr_periods 100\n"
        f"nr_throttled {throttled}\nthrottled_usec 0\n"
    )
    (path / "cpu.max").write_text(quota)


def test_collector_fills_the_cgroups_cpu_from_two_readings(tmp_path):
    from diskinfo.sources.cgroup_cpu import CpuLocation

    group = tmp_path / "ctr"
    _v2_dir(group, 1_000_000, 0, "200000 100000\n")
    now = [100.0]
    coll = HostCollector(
        read=lambda p: {"/proc/stat": STAT_A, "/proc/meminfo": "MemTotal: 1 kB\n"}[p],
        cpu_location=lambda: CpuLocation(2, str(group), str(group), "/docker/ab"),
        clock=lambda: now[0],
    )
    coll.start()
    (group / "cpu.stat").write_text(
        "usage_usec 4000000\nnr_periods 140\nnr_throttled 10\n"
    )  # 3 s of CPU in 2 s: 1.5 cores of 2 allowed, 10 of 40 periods throttled
    now[0] = 102.0
    rec = IntervalRecord(ts=0, elapsed_s=2.0)
    coll.fill(rec)
    h = rec.cpu
    assert h is not None and h.cgroup_path == "/docker/ab"
    assert h.cgroup_cpu_cores == pytest.approx(1.5) and h.cgroup_cpu_quota == 2.0
    assert h.cgroup_cpu_allowed == pytest.approx(min(2.0, len(os.sched_getaffinity(0))))
    assert h.cgroup_cpu_throttled == pytest.approx(0.25)


def test_v1_cpuacct_and_cpu_directories(tmp_path):
    from diskinfo.sources.cgroup_cpu import CpuLocation, read_quota, read_sample

    acct, cpu = tmp_path / "cpuacct", tmp_path / "cpu"
    acct.mkdir()
    cpu.mkdir()
    (acct / "cpuacct.usage").write_text("2500000000\n")
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    (cpu / "cpu.stat").write_text("nr_periods 0\nnr_throttled 0\nthrottled_time 0\n")
    loc = CpuLocation(1, str(acct), str(cpu), "/g")
    s = read_sample(loc, read_quota(loc))
    assert s.usage_s == 2.5 and s.quota_cores is None
    (cpu / "cpu.cfs_quota_us").write_text("150000\n")
    (cpu / "cpu.stat").write_text("nr_periods 8\nnr_throttled 2\nthrottled_time 5\n")
    s = read_sample(loc, read_quota(loc))
    assert s.quota_cores == 1.5 and (s.periods, s.throttled) == (8, 2)


def test_live_cgroup_cpu_is_found_and_read():
    from diskinfo.cores import own_cpu_location
    from diskinfo.sources.cgroup_cpu import read_quota, read_sample

    loc = own_cpu_location()  # None where no cgroup filesystem is mounted (some CI containers)
    if loc is None:
        pytest.skip("no cgroup CPU controller mounted")
    assert read_sample(loc, read_quota(loc)).usage_s > 0
