"""Path -> mount -> device -> disks on captured trees: NVMe, partitions, LVM on md RAID,
dm-crypt, btrfs on two devices, loop devices, bind mounts and a container's overlay root."""

from __future__ import annotations

import pytest

from diskinfo.commands.resolve import describe, format_text
from diskinfo.errors import UserError
from diskinfo.sources.mountinfo import is_under, mount_for, parse
from tests.helpers.fixtures import resolver


def names(infos):
    return [i.name for i in infos]


def test_nvme_root_partition_and_its_namespace():
    res = resolver("nvme-partitions").resolve("/home/user/train.py")
    assert res.mount.mountpoint == "/"
    assert res.device.name == "nvme0n1p2" and res.device.partition
    assert res.device.parent == "nvme0n1"
    assert names(res.disks) == ["nvme0n1"]
    assert res.disks[0].kind == "nvme" and res.disks[0].model == "Samsung SSD 980 PRO 2TB"
    assert res.watch_devices == ["nvme0n1p2", "nvme0n1"]
    assert "partition of nvme0n1" in describe(res.device)


def test_bind_mount_is_resolved_by_major_minor():
    res = resolver("nvme-partitions").resolve("/workspace/data/train/0001.jpg")
    assert res.mount.mountpoint == "/workspace/data"
    assert res.mount.root == "/datasets/imagenet"
    assert (res.device.name, names(res.disks)) == ("sda1", ["sda"])
    assert res.disks[0].rotational is True
    assert any("bind of /datasets/imagenet" in line for line in format_text(res))


def test_prefix_of_a_longer_mount_point_is_not_a_match():
    r = resolver("nvme-partitions")
    assert r.resolve("/data2/x").device.name == "nvme0n1p2"  # not /data's sda1
    assert r.resolve("/data/x").device.name == "sda1"
    assert r.resolve("/data").device.name == "sda1"
    assert r.resolve("/boot/efi/EFI").device.name == "nvme0n1p1"


def test_stacked_mounts_last_entry_wins():
    res = resolver("nvme-partitions").resolve("/mnt/stack/file")
    assert res.mount.mount_id == 32 and res.device.name == "sda1"


def test_escaped_mount_point_and_memory_filesystem():
    res = resolver("nvme-partitions").resolve("/mnt/my data/f")
    assert res.mount.mountpoint == "/mnt/my data"
    assert res.kind == "memory" and not res.measurable
    assert "memory-backed" in res.note


def test_fuse_and_pseudo_filesystems_get_a_plain_explanation():
    r = resolver("nvme-partitions")
    fuse = r.resolve("/mnt/sshfs/data")
    assert fuse.kind == "fuse" and not fuse.measurable
    assert "FUSE" in fuse.note and "user@nas:/data" in fuse.note
    proc = r.resolve("/proc/1")
    assert proc.kind == "pseudo" and not proc.measurable


def test_lvm_on_md_raid_follows_slaves_to_the_physical_disks():
    res = resolver("lvm-md-crypt").resolve("/srv/data/shards/000.tar")
    assert res.device.name == "dm-1" and res.device.kind == "dm"
    assert res.device.dm_name == "vg0-data"
    assert names(res.members) == ["md0"]
    assert names(res.disks) == ["sda", "sdb"]
    assert res.watch_devices == ["dm-1", "sda", "sdb"]
    assert "LVM vg0-data" in describe(res.device)


def test_md_raid_directly_and_dm_crypt():
    r = resolver("lvm-md-crypt")
    md = r.resolve("/mnt/md-direct")
    assert md.device.kind == "md" and md.device.md_level == "raid1"
    assert names(md.members) == ["sda1", "sdb1"] and names(md.disks) == ["sda", "sdb"]
    crypt = r.resolve("/secure/keys")
    assert "dm-crypt cryptdata" in describe(crypt.device)
    assert names(crypt.disks) == ["sdc"]
    assert r.resolve("/etc").device.dm_name == "vg0-root"


def test_btrfs_on_two_devices_lists_every_member():
    res = resolver("host-loops").resolve("/mnt/fx/btr/file")
    assert res.kind == "btrfs" and res.mount.major == 0
    assert names(res.members) == ["loop1", "loop2"]
    assert res.watch_devices == ["loop1", "loop2"]


def test_loop_device_resolves_its_backing_file_too():
    res = resolver("host-loops").resolve("/mnt/fx/bind/x")
    assert res.mount.root == "/data" and res.device.kind == "loop"
    assert res.device.loop_backing == "/tmp/fx3.img"
    assert res.backing is not None and res.backing.device.name == "vda"
    assert res.watch_devices == ["loop3", "vda"]


def test_container_overlay_root_names_the_docker_data_disk_by_inference():
    r = resolver("container-overlay")
    root = r.resolve("/opt/app/x.py")
    assert root.kind == "overlay" and root.inferred
    assert root.device.name == "vda" and root.watch_devices == ["vda"]
    assert "upper layer" in root.note
    data = r.resolve("/workspace/data/img.jpg")
    assert (data.device.name, data.mount.root) == ("loop3", "/data")
    assert r.resolve("/dev/shm/x").kind == "memory"
    assert r.resolve("/etc/hosts").device.name == "vda"


def test_overlay_without_visible_layers_is_explained():
    text = "1 0 0:40 / / rw - overlay overlay rw,lowerdir=/l1:/l2,upperdir=/up/diff,workdir=/w\n"
    from diskinfo.resolve import Resolver
    from diskinfo.sources.sysfs import SysFs

    r = Resolver(mounts=parse(text)[0], sysfs=SysFs("/nonexistent"), check_fs=False)
    res = r.resolve("/x")
    assert res.kind == "overlay" and not res.measurable
    assert "/up/diff" in res.note and "cgroup" in res.note


def test_nfs_mount_is_classified_for_mountstats():
    res = resolver("nfs").resolve("/mnt/datasets/imagenet/train")
    assert res.kind == "nfs" and res.mount.source == "nas01:/export/datasets"
    assert "mountstats" in res.note and not res.watch_devices


def test_path_outside_every_mount_and_live_nonexistent_path():
    from diskinfo.resolve import Resolver
    from diskinfo.sources.sysfs import SysFs

    empty = Resolver(mounts=[], sysfs=SysFs("/nonexistent"), check_fs=False)
    with pytest.raises(UserError):
        empty.resolve("/x")
    with pytest.raises(UserError) as exc:
        Resolver.live().resolve("/no/such/path/for/diskinfo")
    assert exc.value.exit_code == 2


def test_component_boundaries():
    assert is_under("/data", "/data") and is_under("/data/x", "/data")
    assert not is_under("/data2", "/data") and not is_under("/dat", "/data")
    assert is_under("/anything", "/") and is_under("/data/x", "/data/")
    mounts, _ = parse(
        "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:2 / /data rw - ext4 /dev/sda2 rw\n"
    )
    assert mount_for("/data2/x", mounts).mountpoint == "/"


def test_resolve_command_prints_nfs_mountstats(monkeypatch, capsys):
    import argparse

    from diskinfo.commands import resolve as command
    from diskinfo.sources import mountstats
    from tests.helpers.fixtures import text

    monkeypatch.setattr(mountstats, "read", lambda: text("nfs", "proc/self/mountstats"))
    stats = command.nfs_stats("/mnt/datasets")
    assert stats["server"] == "nas01" and stats["read_ops"] == 93712
    assert stats["read_rtt_ms_avg"] == pytest.approx(2211203 / 93712)
    assert stats["read_bytes"] == 98234112334  # normal + O_DIRECT, as the monitor counts
    monkeypatch.setattr(command.Resolver, "live", classmethod(lambda cls: resolver("nfs")))
    assert command.run(argparse.Namespace(paths=["/mnt/datasets/x"], json=False)) == 0
    out = capsys.readouterr().out
    assert "nfs      read 98234112334 B in 93712 READs (rtt 23.60 ms)" in out
    assert command.run(argparse.Namespace(paths=["/mnt/scratch"], json=True)) == 0
    assert '"write_ops": 1200' in capsys.readouterr().out
