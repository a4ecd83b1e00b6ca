"""The device-baseline store (keyed by the disk's identity), the identity read from captured /sys
trees, and the O_DIRECT readers of `diskinfo bench`."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo import readspeed as bench
from diskinfo.analyse import baseline
from diskinfo.analyse.baseline import BaselineCache, DeviceBaseline
from diskinfo.errors import UserError
from diskinfo.sources.blockid import DeviceIdentity, block_devices, read_identity
from diskinfo.sources.sysfs import SysFs
from tests.helpers.fixtures import tree

SDA_WWID = "t10.ATA Samsung SSD 870 EVO 1TB S6PUNX0R401234A"


def sysfs(root: Path | None = None) -> SysFs:
    return SysFs(str(root or tree("identity") / "sys"))


def identify(root: Path | None = None):
    fs = sysfs(root)
    return lambda name: read_identity(name, fs)


def measured(device: str, mb_s: float, root: Path | None = None) -> DeviceBaseline:
    return DeviceBaseline(device, mb_s, 9000.0, identity=identify(root)(device))


def load(store: Path, root: Path | None = None) -> dict[str, DeviceBaseline]:
    return baseline.match(baseline.read_store(store), identify(root), block_devices(sysfs(root)))


def test_identity_of_each_kind_of_device():
    who = identify()
    sda = who("sda")
    assert sda == DeviceIdentity(
        model="Samsung SSD 870 EVO 1TB", wwid=SDA_WWID, size_bytes=1953525168 * 512
    )
    assert sda.strong and "S6PUNX0R401234A" in sda.describe()
    part = who("sda1")
    assert (part.model, part.wwid, part.partition) == (sda.model, SDA_WWID, "1@2048")
    assert part.size_bytes == 1953521664 * 512
    nvme = who("nvme0n1")
    assert (nvme.serial, nvme.wwid) == ("S5GXNF0R123456", "eui.002538b111a2b3c4")
    assert who("nvme0n1p2").partition == "2@2099200"
    assert who("vdb").serial == "data-disk-01" and not who("vdb").location
    vda = who("vda")  # a virtio disk without a serial: its place on the bus stands in
    assert not vda.strong and vda.location == "devices/pci0000:00/0000:00:02.0/virtio1/block/vda"
    assert who("dm-0").wwid.startswith("dm:LVM-Qx3Jm2b7")
    assert who("loop0").wwid == "loop:/var/lib/images/data.img@0"
    assert who("sdz") is None


def test_two_disks_of_one_model_and_size_differ():
    who = identify()
    assert who("sda").model == who("sdb").model and who("sda").size_bytes == who("sdb").size_bytes
    assert who("sda") != who("sdb")


def test_save_merges_by_disk_and_load_reads_back(tmp_path):
    store = tmp_path / "sub" / "baseline.json"
    baseline.save([measured("sda", 1000.0)], store)
    baseline.save([measured("nvme0n1", 3000.0)], store)
    baseline.save([measured("sda", 1100.0)], store)
    loaded = load(store)
    assert sorted(loaded) == ["nvme0n1", "sda"] and loaded["sda"].seq_read_mb_s == 1100.0
    data = json.loads(store.read_text())
    assert data["schema"] == baseline.SCHEMA and len(data["devices"]) == 2
    assert data["devices"][0]["identity"]["serial"] == "S5GXNF0R123456"


@pytest.mark.skipif(os.geteuid() != 0, reason="the owner is given only when run as root")
def test_a_root_bench_in_a_users_logs_leaves_the_users_files(tmp_path):
    """`docker exec CONTAINER diskinfo bench` runs as root and writes into the user's logs."""
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chown(logs, 1234, 1234)
    store = logs / "state" / "baseline.json"
    baseline.save([measured("sda", 1000.0)], store)
    for path in (store, store.parent):
        assert (path.stat().st_uid, path.stat().st_gid) == (1234, 1234), path


def test_a_different_disk_under_the_same_name_never_uses_it(tmp_path):
    store = tmp_path / "baseline.json"
    baseline.save([measured("sdb", 500.0)], store)
    assert load(store)["sdb"].seq_read_mb_s == 500.0
    swapped = tmp_path / "swapped"  # sdb replaced by a disk of the same model and size
    shutil.copytree(tree("identity"), swapped, symlinks=True)
    wwid = next((swapped / "sys").glob("devices/**/block/sdb/device/wwid"))
    wwid.write_text(wwid.read_text().replace("S6PUNX0R409876B", "S6PUNX0R555555C"))
    assert load(store, swapped / "sys") == {}


def test_a_renamed_disk_keeps_its_baseline(tmp_path):
    store = tmp_path / "baseline.json"
    entry = measured("sda", 700.0)
    entry.device = "sdc"  # measured when this disk was sdc; today it is sda
    baseline.save([entry], store)
    assert list(load(store)) == ["sda"]


def test_an_old_format_store_is_read_without_a_traceback_and_not_used(tmp_path):
    store = tmp_path / "baseline.json"
    store.write_text(
        json.dumps(
            {
                "schema": "diskinfo.baseline/1",
                "devices": {"sda": {"device": "sda", "seq_read_mb_s": 900.0, "rand_read_iops": 1}},
            }
        )
    )
    old = baseline.read_store(store)
    assert [(e.device, e.seq_read_mb_s, e.identity) for e in old] == [("sda", 900.0, None)]
    assert load(store) == {}  # no identity: no proof it is the same disk
    baseline.save([measured("sda", 1000.0)], store)  # the next bench writes the new format
    data = json.loads(store.read_text())
    assert data["schema"] == baseline.SCHEMA and [d["device"] for d in data["devices"]] == ["sda"]


def test_missing_or_broken_store_means_no_baseline(tmp_path):
    assert baseline.load(tmp_path / "none.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    assert baseline.load(tmp_path / "bad.json") == {}
    (tmp_path / "odd.json").write_text('{"devices": {"vda": {"seq_read_mb_s": "x"}, "sdb": 3}}')
    assert baseline.read_store(tmp_path / "odd.json") == []
    (tmp_path / "odd2.json").write_text(
        '{"devices": [{"device": "sda", "seq_read_mb_s": 1, "rand_read_iops": 2,'
        ' "identity": {"size_bytes": "big"}}, 7, null]}'
    )
    assert baseline.read_store(tmp_path / "odd2.json") == []
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00")
    assert baseline.read_store(tmp_path / "bin.json") == []


@given(st.text(max_size=200))
def test_parse_fuzz(text):
    with contextlib.suppress(ValueError):
        baseline.parse(text)


@given(
    st.recursive(
        st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=5),
        lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=8), kids),
        max_leaves=12,
    )
)
def test_parse_fuzz_json(data):
    """Any JSON at all: entries or nothing, never an exception other than ValueError."""
    for entry in baseline.parse(json.dumps({"devices": data})):
        assert isinstance(entry.seq_read_mb_s, float)


def test_default_path_follows_the_environment(monkeypatch, tmp_path):
    for name in (baseline.BASELINE_ENV, baseline.LOG_DIR_ENV, "DISKINFO_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(baseline.BASELINE_ENV, str(tmp_path / "b.json"))
    monkeypatch.setenv(baseline.LOG_DIR_ENV, str(tmp_path / "logs"))
    monkeypatch.setenv("DISKINFO_STATE_DIR", str(tmp_path / "state"))
    assert baseline.default_path() == tmp_path / "b.json"
    monkeypatch.delenv(baseline.BASELINE_ENV)
    assert baseline.default_path() == tmp_path / "logs" / "diskinfo-baseline.json"
    monkeypatch.delenv(baseline.LOG_DIR_ENV)
    assert baseline.default_path() == tmp_path / "state" / "baseline.json"
    monkeypatch.delenv("DISKINFO_STATE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert baseline.default_path() == tmp_path / "cache" / "diskinfo" / "baseline.json"


def test_cache_rereads_when_the_file_changes_and_rematches_disks(tmp_path):
    store = tmp_path / "baseline.json"
    root = tmp_path / "sys"
    shutil.copytree(tree("identity") / "sys", root, symlinks=True)
    now = [0.0]
    cache = BaselineCache(
        store,
        identify=identify(root),
        names=lambda: block_devices(sysfs(root)),
        clock=lambda: now[0],
    )
    assert cache() == {}
    baseline.save([measured("sdb", 1000.0, root)], store)
    assert cache() == {}  # the store is looked at every RESTAT_S, not every sample
    now[0] += baseline.RESTAT_S
    assert cache()["sdb"].seq_read_mb_s == 1000.0
    matched_at = now[0]
    first = cache()
    now[0] += baseline.RESTAT_S
    assert cache() is first  # unchanged file: no re-read
    wwid = next(root.glob("devices/**/block/sdb/device/wwid"))
    wwid.write_text("t10.ATA another disk")  # swapped while the monitor runs
    now[0] = matched_at + baseline.REMATCH_S - 1
    assert "sdb" in cache()
    now[0] += 1
    assert cache() == {}
    baseline.save([measured("sdb", 900.0, root)], store)  # measured again: this disk now
    now[0] += baseline.RESTAT_S
    assert cache()["sdb"].seq_read_mb_s == 900.0
    os.unlink(store)
    now[0] += baseline.RESTAT_S
    assert cache() == {}


def test_direct_readers_on_a_real_file(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(4 << 20))
    seq = bench.sequential_read(str(path), 0.2)
    rand = bench.random_read(str(path), 0.2)
    assert seq.nbytes >= 4 << 20 and seq.mb_s > 0  # wrapped around the 4 MiB file
    assert rand.ios > 10 and rand.iops > 0 and rand.nbytes == rand.ios * 4096


def test_direct_io_refused_is_a_user_error(monkeypatch, tmp_path):
    # filesystems without O_DIRECT answer EINVAL (tmpfs before Linux 6.6, some FUSE)
    import errno

    def refuse(path, flags, *args):
        raise OSError(errno.EINVAL, "Invalid argument", path)

    monkeypatch.setattr(bench.os, "open", refuse)
    with pytest.raises(UserError, match="does not support direct I/O"):
        bench.sequential_read(str(tmp_path / "x"), 0.1)


def test_the_live_device_under_a_directory_has_an_identity(tmp_path):
    """What `diskinfo bench` stores: the identity of the device behind the path, as /sys says."""
    try:
        device = bench.device_of(str(tmp_path))
    except UserError as exc:  # tmpfs or overlay without a visible disk in a bare CI container
        pytest.skip(str(exc))
    live = read_identity(device)
    assert live is not None and live.size_bytes > 0 and live == read_identity(device)


def test_the_largest_file_search_is_bounded_and_stays_on_its_filesystem(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "big.bin").write_bytes(b"x" * 3000)
    (tmp_path / "small.bin").write_bytes(b"x" * 10)
    (tmp_path / "link.bin").symlink_to(tmp_path / "a" / "b" / "big.bin")  # not followed
    assert bench.largest_file(str(tmp_path)) == (str(tmp_path / "a" / "b" / "big.bin"), 3000)
    # one huge folder: its first entries only (here one: small.bin, a or link.bin)
    found = bench.largest_file(str(tmp_path), max_entries=1)
    assert found is None or found[1] <= 10
