"""/sys: the block-device tree behind a major:minor, read through a movable root.

Everything goes through `SysFs(root)`, so tests run the same code on captured trees in
tests/fixtures/ (symlinks included) as on the live /sys.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class BlockInfo:
    """What /sys says about one block device."""

    name: str  # kernel name: sda1, nvme0n1, dm-0, md0, loop3
    devno: str  # "major:minor"
    partition: bool = False
    parent: str | None = None  # whole disk of a partition
    slaves: list[str] = field(default_factory=list)  # dm/md members (kernel names)
    kind: str = "disk"  # disk | partition | dm | md | loop | nvme | virtual
    dm_name: str | None = None  # LVM/dm-crypt name, e.g. "vg0-data"
    dm_uuid: str | None = None
    md_level: str | None = None  # raid0, raid1, ...
    loop_backing: str | None = None  # the file a loop device reads
    model: str | None = None
    rotational: bool | None = None
    size_bytes: int | None = None


class SysFs:
    def __init__(self, root: str = "/sys") -> None:
        self.root = root.rstrip("/") or "/"

    def _path(self, rel: str) -> str:
        return os.path.join(self.root, rel.lstrip("/"))

    def read(self, rel: str) -> str | None:
        try:
            with open(self._path(rel), encoding="utf-8", errors="replace") as f:
                return f.read().strip()
        except OSError:
            return None

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self._path(rel)))
        except OSError:
            return []

    def exists(self, rel: str) -> bool:
        return os.path.exists(self._path(rel))

    def device_dir(self, devno: str) -> str | None:
        """The device's directory (relative to the root) behind /sys/dev/block/MAJ:MIN."""
        link = self._path(f"dev/block/{devno}")
        if not os.path.exists(link):
            return None
        real = os.path.realpath(link)
        root = os.path.realpath(self.root)
        return os.path.relpath(real, root)

    def block_dir(self, name: str) -> str | None:
        """Directory of a device by kernel name (/sys/class/block/NAME)."""
        link = self._path(f"class/block/{name}")
        if os.path.exists(link):
            return os.path.relpath(os.path.realpath(link), os.path.realpath(self.root))
        if self.exists(f"block/{name}"):
            return os.path.relpath(
                os.path.realpath(self._path(f"block/{name}")), os.path.realpath(self.root)
            )
        return None

    def info(self, devno: str) -> BlockInfo | None:
        rel = self.device_dir(devno)
        return None if rel is None else self._info(rel)

    def info_by_name(self, name: str) -> BlockInfo | None:
        rel = self.block_dir(name)
        return None if rel is None else self._info(rel)

    def _info(self, rel: str) -> BlockInfo:
        name = os.path.basename(rel)
        devno = self.read(f"{rel}/dev") or ""
        info = BlockInfo(name=name, devno=devno)
        if self.exists(f"{rel}/partition"):
            info.partition = True
            info.kind = "partition"
            info.parent = os.path.basename(os.path.dirname(rel))
        info.slaves = self.listdir(f"{rel}/slaves")
        if self.exists(f"{rel}/dm"):
            info.kind = "dm"
            info.dm_name = self.read(f"{rel}/dm/name")
            info.dm_uuid = self.read(f"{rel}/dm/uuid")
        elif self.exists(f"{rel}/md"):
            info.kind = "md"
            info.md_level = self.read(f"{rel}/md/level")
        elif self.exists(f"{rel}/loop"):
            info.kind = "loop"
            info.loop_backing = self.read(f"{rel}/loop/backing_file")
        elif not info.partition and name.startswith("nvme"):
            info.kind = "nvme"
        whole = os.path.dirname(rel) if info.partition else rel
        info.model = self.read(f"{whole}/device/model")
        rot = self.read(f"{whole}/queue/rotational")
        info.rotational = None if rot is None else rot == "1"
        size = self.read(f"{rel}/size")  # in 512-byte sectors, whatever the block size
        if size and size.isdigit():
            info.size_bytes = int(size) * 512
        return info

    def btrfs_devices(self, fs_uuid: str) -> list[str]:
        """Kernel names of a btrfs filesystem's member devices."""
        return self.listdir(f"fs/btrfs/{fs_uuid}/devices")

    def btrfs_uuid_for_member(self, name: str) -> str | None:
        """The btrfs filesystem that has the block device `name` among its members."""
        for fs_uuid in self.listdir("fs/btrfs"):
            if name in self.btrfs_devices(fs_uuid):
                return fs_uuid
        return None
