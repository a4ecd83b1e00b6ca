"""A block device's identity from /sys: what tells one disk from another, across reboots,
renames (sdb today, sdc tomorrow) and containers (a container sees the host's /sys).

The device baseline is keyed by it, so a measurement is never applied to a different disk that
happens to carry the same kernel name.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass

from diskinfo.sources.sysfs import SysFs
from diskinfo.units import SECTOR_BYTES


@dataclass(frozen=True)
class DeviceIdentity:
    """Model, serial or world-wide id, and size. Where a device has neither serial nor id (a
    virtio disk without a serial, md RAID, zram), its place on the bus stands in: weaker, since
    another disk of the same size in the same slot looks the same."""

    model: str = ""
    serial: str = ""
    wwid: str = ""  # device/wwid or wwid (SCSI, NVMe); dm uuid; a loop device's backing file
    size_bytes: int = 0
    partition: str = ""  # "NUMBER@START" (sectors) for a partition, else ""
    location: str = ""  # the sysfs path, only when there is no serial and no wwid

    @property
    def strong(self) -> bool:
        return bool(self.serial or self.wwid)

    def to_dict(self) -> dict[str, str | int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> DeviceIdentity:
        """ValueError unless `data` is a mapping of this class's fields with the right types."""
        if not isinstance(data, dict):
            raise ValueError(f"identity is not an object: {data!r}")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key, value in known.items():
            want = int if key == "size_bytes" else str
            if isinstance(value, bool) or not isinstance(value, want):
                raise ValueError(f"identity {key} is not {want.__name__}: {value!r}")
        return cls(**known)

    def describe(self) -> str:
        """Short words for messages: 'Samsung SSD 870 S6PU..., 1.0 TB'."""
        parts = [p for p in (self.model, self.serial or self.wwid) if p]
        if not parts:
            parts.append(self.location or "no serial")
        return f"{' '.join(parts)}, {self.size_bytes / 1e9:.1f} GB"


def _first(sysfs: SysFs, *rels: str) -> str:
    for rel in rels:
        value = sysfs.read(rel)
        if value:
            return " ".join(value.split())  # SCSI pads model and wwid with runs of spaces
    return ""


def read_identity(name: str, sysfs: SysFs | None = None) -> DeviceIdentity | None:
    """The identity of kernel device `name` (sda, nvme0n1p2, dm-0, loop3); None when /sys has
    no such device."""
    sysfs = sysfs or SysFs()
    rel = sysfs.block_dir(name)
    if rel is None:
        return None
    partition = ""
    whole = rel
    if sysfs.exists(f"{rel}/partition"):
        whole = os.path.dirname(rel)
        partition = f"{sysfs.read(f'{rel}/partition') or '?'}@{sysfs.read(f'{rel}/start') or '?'}"
    wwid = _first(sysfs, f"{whole}/device/wwid", f"{whole}/wwid")
    if not wwid and sysfs.exists(f"{rel}/dm"):
        dm = _first(sysfs, f"{rel}/dm/uuid", f"{rel}/dm/name")
        wwid = f"dm:{dm}" if dm else ""
    if not wwid and sysfs.exists(f"{rel}/loop"):
        backing = _first(sysfs, f"{rel}/loop/backing_file")
        wwid = f"loop:{backing}@{_first(sysfs, f'{rel}/loop/offset') or '0'}" if backing else ""
    serial = _first(sysfs, f"{whole}/device/serial", f"{whole}/serial")
    size = sysfs.read(f"{rel}/size") or ""
    return DeviceIdentity(
        model=_first(sysfs, f"{whole}/device/model"),
        serial=serial,
        wwid=wwid,
        size_bytes=int(size) * SECTOR_BYTES if size.isdigit() else 0,
        partition=partition,
        location="" if serial or wwid else rel,
    )


def block_devices(sysfs: SysFs | None = None) -> list[str]:
    """Kernel names of every block device /sys lists (partitions included)."""
    return (sysfs or SysFs()).listdir("class/block")
