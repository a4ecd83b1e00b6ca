"""WatchedPaths (one resolution shared by the collectors) and the collectors' Notes."""

from __future__ import annotations

import pytest

from diskinfo.collectors import BaseCollector, Notes
from diskinfo.collectors.cgroup import CgroupCollector
from diskinfo.collectors.disk import DiskCollector
from diskinfo.collectors.watched import WatchedPaths
from diskinfo.errors import UserError
from diskinfo.record import IntervalRecord
from diskinfo.resolve import Resolver
from tests.helpers.fixtures import resolver


def test_resolved_once_and_shared_by_the_disk_and_cgroup_collectors():
    calls = []

    def live() -> Resolver:
        calls.append(1)
        return resolver("nvme-partitions")

    watched = WatchedPaths(["/workspace/data"], resolver=live)
    assert watched.resolve(strict=True) == []
    assert watched.devices == {"sda1": ["/workspace/data"], "sda": ["/workspace/data"]}
    disk = DiskCollector(watched, read=lambda: "")
    cgroup = CgroupCollector(watched, locations=lambda: [])
    disk.start()
    cgroup.start()
    assert calls == [1]  # the collectors did not resolve again
    assert cgroup.watched is disk.watched


def test_strict_resolution_refuses_a_missing_path_and_lenient_one_warns():
    live = Resolver.live
    with pytest.raises(UserError) as exc:
        WatchedPaths(["/no/such/path/for/diskinfo"], resolver=live).resolve(strict=True)
    assert exc.value.exit_code == 2
    warnings = WatchedPaths(["/no/such/path/for/diskinfo"], resolver=live).resolve()
    assert len(warnings) == 1 and warnings[0].startswith("/no/such/path/for/diskinfo: ")


def test_a_resolution_that_finds_nothing_keeps_the_last_device_map():
    answers = [resolver("nvme-partitions"), UserError("cannot read /proc/self/mountinfo", 1)]

    def live() -> Resolver:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    watched = WatchedPaths(["/workspace/data"], resolver=live)
    watched.resolve()
    before = watched.devices
    assert watched.resolve() == ["cannot read /proc/self/mountinfo"]
    assert watched.devices is before


def test_nfs_mount_points_and_a_fixed_device_set():
    watched = WatchedPaths(["/mnt/datasets/x"], resolver=lambda: resolver("nfs"))
    watched.resolve(strict=True)
    assert watched.nfs_mountpoints() == ["/mnt/datasets"] and watched.devices == {}
    fixed = WatchedPaths.of_devices(["vda", "loop3"])
    assert fixed.resolved and list(fixed.devices) == ["vda", "loop3"]


def test_notes_say_once_or_every_time_and_go_with_the_next_record():
    notes = Notes()
    for _ in range(3):
        notes.once("gpu: no GPU figures")
    notes.later("disk: sda1: gone")
    notes.later("disk: sda1: gone")
    rec = IntervalRecord(ts=0.0, elapsed_s=1.0)
    notes.flush(rec)
    assert rec.warnings == ["gpu: no GPU figures", "disk: sda1: gone", "disk: sda1: gone"]
    notes.once("gpu: no GPU figures")
    again = IntervalRecord(ts=0.0, elapsed_s=1.0)
    notes.flush(again)
    assert again.warnings == []


def test_the_base_collector_starts_and_stops_as_a_no_op():
    class Quiet(BaseCollector):
        def fill(self, record: IntervalRecord) -> None:
            self.notes.once("quiet: nothing to say")
            self.notes.flush(record)

    c = Quiet()
    c.start()
    rec = IntervalRecord(ts=0.0, elapsed_s=1.0)
    c.fill(rec)
    c.stop()
    assert rec.warnings == ["quiet: nothing to say"]
