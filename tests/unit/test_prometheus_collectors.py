"""The real disk and NFS collectors, fed captured /proc text, through the exporter: the raw
counters Prometheus gets are the kernel's numbers in base units, next to diskinfo's own rates."""

from __future__ import annotations

import time

import pytest

from diskinfo.collectors.disk import DiskCollector
from diskinfo.collectors.nfs import NfsCollector
from diskinfo.collectors.watched import WatchedPaths
from diskinfo.record import IntervalRecord
from diskinfo.sinks.prometheus import PrometheusSink
from tests.helpers.fixtures import resolver, text
from tests.helpers.scrape import get, samples

# sda: reads, sectors, read ms, io ms, weighted ms (the kernel's field order, 20 fields)
DISK = "   8       0 sda {r} 7 {s} {t} 3 1 24 5 0 {io} {w} 2 0 16 1 9 4\n"
PART = "   8       1 sda1 {r} 7 {s} {t} 3 1 24 5 0 {io} {w} 2 0 16 1\n"


def scrape(sink: PrometheusSink) -> dict[tuple, float]:
    return samples(get(sink.port)[2])


class Feed:
    def __init__(self, texts: list[str], dt: float) -> None:
        self.texts, self.t, self.dt = list(texts), 0.0, dt

    def read(self) -> str:
        return self.texts.pop(0)

    def clock(self) -> float:
        self.t += self.dt
        return self.t


@pytest.fixture
def sink():
    s = PrometheusSink(0)
    yield s
    s.close()


def test_disk_collector_counters_reach_prometheus(sink):
    before = DISK.format(r=1000, s=8000, t=400, io=900, w=1200) + PART.format(
        r=1000, s=8000, t=400, io=900, w=1200
    )
    after = DISK.format(r=1200, s=10048, t=500, io=1400, w=1700) + PART.format(
        r=1200, s=10048, t=500, io=1400, w=1700
    )
    feed = Feed([before, after], dt=2.0)
    r = resolver("nvme-partitions")
    watched = WatchedPaths(["/workspace/data"], resolver=lambda: r)
    collector = DiskCollector(watched, read=feed.read, clock=feed.clock)
    collector.start()
    record = IntervalRecord(ts=time.time(), elapsed_s=2.0)
    collector.fill(record)
    sink.write(record)
    got = scrape(sink)
    sda = (("device", "sda"),)
    # the kernel's cumulative numbers, converted to base units
    assert got[("diskinfo_disk_reads_completed_total", sda)] == 1200
    assert got[("diskinfo_disk_read_bytes_total", sda)] == 10048 * 512
    assert got[("diskinfo_disk_read_time_seconds_total", sda)] == pytest.approx(0.5)
    assert got[("diskinfo_disk_io_time_seconds_total", sda)] == pytest.approx(1.4)
    assert got[("diskinfo_disk_io_time_weighted_seconds_total", sda)] == pytest.approx(1.7)
    assert got[("diskinfo_disk_discards_completed_total", sda)] == 2
    assert got[("diskinfo_disk_flush_requests_total", sda)] == 9
    # partitions have no flush counters: absent, not zero
    assert ("diskinfo_disk_flush_requests_total", (("device", "sda1"),)) not in got
    # diskinfo's own interval figures beside them: 200 reads in 2 s, 2048 sectors, 500 ms busy
    assert got[("diskinfo_disk_reads_per_second", sda)] == pytest.approx(100)
    assert got[("diskinfo_disk_read_bytes_per_second", sda)] == pytest.approx(2048 * 512 / 2)
    assert got[("diskinfo_disk_utilization_ratio", sda)] == pytest.approx(0.25)
    assert got[("diskinfo_disk_read_await_seconds", sda)] == pytest.approx(0.0005)
    assert got[("diskinfo_watched_path_info", (("device", "sda"), ("path", "/workspace/data")))]


def test_nfs_collector_counters_reach_prometheus(sink):
    first = text("nfs", "proc/self/mountstats")
    old = "READ: 93712 93714 0 14243504 98245981222 1032 2211203 2245120 0"
    assert old in first
    # 100 more READs, 1000 ms more RTT, 104857600 more bytes in 2 s
    second = first.replace(
        old, "READ: 93812 93814 0 14243504 98350838822 1032 2212203 2246320 0"
    ).replace(
        "bytes:\t98234112334 1234567 0 0 98234112334",
        "bytes:\t98338969934 1234567 0 0 98338969934",
    )
    assert second.count("98338969934") == 2
    feed = Feed([first, second], dt=2.0)
    collector = NfsCollector(["/mnt/datasets"], read=feed.read, clock=feed.clock)
    collector.start()
    record = IntervalRecord(ts=time.time(), elapsed_s=2.0)
    collector.fill(record)
    assert not record.warnings, record.warnings
    sink.write(record)
    got = scrape(sink)
    m = (("mount", "/mnt/datasets"), ("server", "nas01"))
    assert got[("diskinfo_nfs_read_operations_total", m)] == 93812
    assert got[("diskinfo_nfs_read_bytes_total", m)] == 98338969934
    assert got[("diskinfo_nfs_read_rtt_seconds_total", m)] == pytest.approx(2212.203)
    assert got[("diskinfo_nfs_read_execute_seconds_total", m)] == pytest.approx(2246.32)
    assert got[("diskinfo_nfs_read_operations_per_second", m)] == pytest.approx(50)
    assert got[("diskinfo_nfs_read_bytes_per_second", m)] == pytest.approx(104857600 / 2)
    assert got[("diskinfo_nfs_read_rtt_mean_seconds", m)] == pytest.approx(0.010)
