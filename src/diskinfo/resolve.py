"""Path -> mount -> block device -> the physical disks underneath.

The mount comes from /proc/self/mountinfo (longest mount point containing the path on
component boundaries, the last one when stacked), the device from the mount's major:minor
through /sys/dev/block, never from mount-point or device-name string matching: inside a
container psutil's partition list shows bind-mounted files, not the container's paths.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any

from diskinfo.errors import UserError
from diskinfo.sources import mountinfo
from diskinfo.sources.mountinfo import Mount
from diskinfo.sources.sysfs import BlockInfo, SysFs

MEMORY_FS = frozenset({"tmpfs", "ramfs", "devtmpfs", "hugetlbfs", "shm"})
PSEUDO_FS = frozenset(
    {
        "proc",
        "sysfs",
        "cgroup",
        "cgroup2",
        "devpts",
        "mqueue",
        "debugfs",
        "tracefs",
        "securityfs",
        "pstore",
        "bpf",
        "configfs",
        "binfmt_misc",
        "autofs",
        "nsfs",
        "fusectl",
        "efivarfs",
    }
)
NFS_FS = frozenset({"nfs", "nfs4"})
NETWORK_FS = frozenset({"cifs", "smb3", "ceph", "9p", "virtiofs", "lustre", "gpfs", "beegfs"})

_EXPLAIN = {
    "memory": (
        "{fstype} is memory-backed: there is no block device and no disk I/O to measure. "
        "Reads and writes are memory traffic; what can be watched is its size against RAM "
        "(and, for /dev/shm, whether DataLoader workers run out of it)."
    ),
    "pseudo": "{fstype} is a kernel pseudo-filesystem: no storage behind it to measure.",
    "fuse": (
        "{fstype} is a FUSE (user-space) filesystem served by a daemon ({source}): the kernel "
        "has no block device for it, so iostat-style figures do not exist. Measure the "
        "daemon's own I/O (its process read bytes) or the storage it reads from."
    ),
    "network": (
        "{fstype} is a network or host-shared filesystem ({source}): no local block device. "
        "Throughput and latency are the network's and the server's; the kernel keeps no "
        "per-mount statistics for it that diskinfo reads."
    ),
    "nfs": (
        "NFS mount of {source}: no local block device. Per-mount statistics come from "
        "/proc/self/mountstats: bytes read and written, operations, RTT and execution time "
        "per operation, retransmissions (as nfsiostat)."
    ),
    "overlay-unknown": (
        "overlay filesystem whose layers are not visible from here: its writes land in the "
        "upper directory on the host ({upper}), reads in the lower layers. The disk behind "
        "it cannot be named from inside this mount namespace; the container's own I/O is "
        "counted in its cgroup (io.stat)."
    ),
    "unknown": (
        "{fstype} on anonymous device {devno} ({source}): no block device in /sys to measure."
    ),
}


@dataclass
class Resolution:
    """How one path maps onto storage, and what of it diskinfo can measure."""

    path: str
    realpath: str
    mount: Mount
    kind: str  # block | btrfs | overlay | nfs | memory | pseudo | fuse | network | unknown
    device: BlockInfo | None = None  # the device named by the mount (a partition, dm-0, ...)
    members: list[BlockInfo] = field(default_factory=list)  # btrfs members, dm/md slaves
    disks: list[BlockInfo] = field(default_factory=list)  # physical (whole, leaf) disks
    backing: Resolution | None = None  # loop device's backing file; overlay's upper dir
    inferred: bool = False  # device named by inference (overlay root in a container)
    node: bool = False  # the path is a block device node: the device itself, not a file on it
    note: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def measurable(self) -> bool:
        return bool(self.watch_devices)

    @property
    def watch_devices(self) -> list[str]:
        """Devices the monitor samples: the top device (latency as the filesystem sees it)
        and the leaf disks (saturation), each once, top first."""
        names: list[str] = []
        tops = [self.device] if self.device is not None else self.members
        for info in [*tops, *self.disks]:
            if info is not None and info.name not in names:
                names.append(info.name)
        if self.backing is not None and self.kind == "block":
            for name in self.backing.watch_devices:
                if name not in names:
                    names.append(name)
        return names

    def to_dict(self) -> dict[str, Any]:
        def info(b: BlockInfo | None) -> dict[str, Any] | None:
            return None if b is None else dict(b.__dict__)

        m = self.mount
        return {
            "path": self.path,
            "realpath": self.realpath,
            "mount": {
                "mountpoint": m.mountpoint,
                "root": m.root,
                "fstype": m.fstype,
                "source": m.source,
                "devno": m.devno,
                "options": m.options,
            },
            "kind": self.kind,
            "device": info(self.device),
            "members": [info(b) for b in self.members],
            "disks": [info(b) for b in self.disks],
            "backing": None if self.backing is None else self.backing.to_dict(),
            "inferred": self.inferred,
            "node": self.node,
            "measurable": self.measurable,
            "watch_devices": self.watch_devices,
            "note": self.note,
            "warnings": self.warnings,
        }


def leaf_disks(info: BlockInfo, sysfs: SysFs, _seen: set[str] | None = None) -> list[BlockInfo]:
    """The whole disks at the bottom of a device stack: partition -> its disk, dm/md ->
    their slaves, recursively (a dm on an md on partitions ends at the partitions' disks)."""
    seen = _seen if _seen is not None else set()
    if info.name in seen:
        return []
    seen.add(info.name)
    if info.partition and info.parent:
        parent = sysfs.info_by_name(info.parent)
        return leaf_disks(parent, sysfs, seen) if parent else [info]
    if info.slaves:
        out: list[BlockInfo] = []
        for slave in info.slaves:
            sub = sysfs.info_by_name(slave)
            if sub is None:
                continue
            for disk in leaf_disks(sub, sysfs, seen):
                if disk.name not in {d.name for d in out}:
                    out.append(disk)
        return out
    return [info]


def _members(info: BlockInfo, sysfs: SysFs) -> list[BlockInfo]:
    """The devices directly under a dm/md device (its slaves)."""
    return [s for s in (sysfs.info_by_name(n) for n in info.slaves) if s is not None]


def _source_device(source: str, sysfs: SysFs) -> BlockInfo | None:
    """The block device a mount source such as /dev/sdb1 or /dev/mapper/vg-lv names."""
    base = os.path.basename(source)
    if not source.startswith("/dev/") or not base:
        return None
    found = sysfs.info_by_name(base)
    if found is not None:
        return found
    for name in sysfs.listdir("class/block"):  # /dev/mapper/NAME: match dm/name
        if sysfs.read(f"class/block/{name}/dm/name") == base:
            return sysfs.info_by_name(name)
    return None


def _common_components(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.strip("/").split("/"), b.strip("/").split("/"), strict=False):
        if x != y:
            break
        n += 1
    return n


def _infer_overlay(mount: Mount, mounts: list[Mount], sysfs: SysFs) -> BlockInfo | None:
    """Inside a container the overlay's upper dir is a host path (/var/lib/docker/overlay2/
    ...) that cannot be resolved here. Docker also bind-mounts files from its data root
    (/etc/hosts from /var/lib/docker/containers/...): the mount whose root shares the most
    leading components (at least three) with the upper dir is on the same host filesystem."""
    upper = mount.super_option("upperdir")
    if not upper:
        return None
    best, best_n = None, 2  # more than /var/lib in common: /var/lib/docker, not kubelet's
    for other in mounts:
        if other.major == 0:
            continue
        n = _common_components(upper, other.root)
        if n > best_n:
            best, best_n = other, n
    return None if best is None else sysfs.info(best.devno)


def _from_device(res: Resolution, info: BlockInfo, sysfs: SysFs, resolver: Resolver) -> None:
    res.device = info
    res.members = _members(info, sysfs)
    res.disks = leaf_disks(info, sysfs)
    if info.kind == "loop" and info.loop_backing:
        backing = info.loop_backing.removesuffix(" (deleted)")
        try:
            res.backing = resolver.resolve(backing, depth=1)
        except UserError:
            res.note = (
                f"{info.name} reads the file {backing}, which is not visible from this mount "
                "namespace (a host path, seen from a container): the disk under it is not "
                "named here."
            )


@dataclass
class Resolver:
    """Resolves paths against one snapshot of the mount table and a /sys tree."""

    mounts: list[Mount]
    sysfs: SysFs
    check_fs: bool = True  # stat the real path (off for captured fixtures)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def live(cls) -> Resolver:
        try:
            text = mountinfo.read()
        except OSError as exc:
            raise UserError(f"cannot read {mountinfo.PATH}: {exc.strerror}", 1) from None
        mounts, errors = mountinfo.parse(text)
        return cls(mounts=mounts, sysfs=SysFs("/sys"), warnings=errors)

    def resolve(self, path: str, depth: int = 0) -> Resolution:
        if self.check_fs:
            if not os.path.exists(path):
                raise UserError(f"no such file or directory: {path}")
            real = os.path.realpath(path)
        else:
            real = os.path.normpath(path)
        if self.check_fs and depth == 0:
            node = self._device_node(path, real)
            if node is not None:
                return node
        mount = mountinfo.mount_for(real, self.mounts)
        if mount is None:
            raise UserError(f"no mount in {mountinfo.PATH} contains {real}", 1)
        warnings: list[str] = []
        if self.check_fs:
            mount = self._check_st_dev(real, mount, warnings)
        res = Resolution(path=path, realpath=real, mount=mount, kind="unknown")
        res.warnings.extend(warnings)
        self._classify(res, depth)
        return res

    def _device_node(self, path: str, real: str) -> Resolution | None:
        """A block device node (/dev/nvme0n1, /dev/loop3) stands for that device itself."""
        try:
            st = os.stat(real)
        except OSError:
            return None
        if not stat.S_ISBLK(st.st_mode):
            return None
        devno = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        info = self.sysfs.info(devno)
        mount = mountinfo.mount_for(real, self.mounts)
        if info is None or mount is None:
            return None
        res = Resolution(path=path, realpath=real, mount=mount, kind="block", node=True)
        _from_device(res, info, self.sysfs, self)
        res.note = f"{real} is the block device node of {info.name} itself"
        return res

    def _check_st_dev(self, real: str, mount: Mount, warnings: list[str]) -> Mount:
        """A mount hidden under a later one still looks longest; st_dev settles it."""
        try:
            st = os.stat(real)
        except OSError:
            return mount
        devno = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        # btrfs subvolumes have their own st_dev; overlay reports its layers' for files
        if devno == mount.devno or mount.fstype in ("btrfs", "overlay"):
            return mount
        candidates = [
            m for m in self.mounts if m.devno == devno and mountinfo.is_under(real, m.mountpoint)
        ]
        if candidates:
            best = max(reversed(candidates), key=lambda m: len(m.mountpoint))
            warnings.append(f"{mount.mountpoint} is hidden; {best.mountpoint} serves {real}")
            return best
        return mount

    def _classify(self, res: Resolution, depth: int) -> None:
        m, sysfs = res.mount, self.sysfs
        fstype = m.fstype
        fmt = {"fstype": fstype, "source": m.source, "devno": m.devno, "upper": ""}
        if m.major != 0:
            info = sysfs.info(m.devno)
            if info is None:
                res.kind = "unknown"
                res.note = f"{fstype} on {m.devno} ({m.source}): not in /sys/dev/block"
                return
            res.kind = "block"
            if depth < 3:
                _from_device(res, info, sysfs, self)
            else:
                res.device, res.disks = info, leaf_disks(info, sysfs)
            return
        if fstype == "btrfs":
            res.kind = "btrfs"
            src = _source_device(m.source, sysfs)
            fs_uuid = sysfs.btrfs_uuid_for_member(src.name) if src else None
            names = sysfs.btrfs_devices(fs_uuid) if fs_uuid else ([src.name] if src else [])
            res.members = [b for b in (sysfs.info_by_name(n) for n in names) if b]
            for member in res.members:
                for disk in leaf_disks(member, sysfs):
                    if disk.name not in {d.name for d in res.disks}:
                        res.disks.append(disk)
            if res.members:
                res.note = f"btrfs {fs_uuid or ''} on {len(res.members)} device(s)".strip()
            else:
                res.note = f"btrfs on {m.source}: its member devices are not visible in /sys"
            return
        if fstype == "overlay":
            res.kind = "overlay"
            upper = m.super_option("upperdir") or ""
            fmt["upper"] = upper or "none"
            if upper and self.check_fs and os.path.isdir(upper) and depth < 3:
                try:
                    res.backing = self.resolve(upper, depth + 1)
                except UserError:
                    res.backing = None
            if res.backing is not None and res.backing.watch_devices:
                res.device = res.backing.device
                res.members = res.backing.members
                res.disks = res.backing.disks
                res.note = f"overlay: upper layer {upper} is on {res.backing.mount.mountpoint}"
                return
            inferred = _infer_overlay(m, self.mounts, sysfs)
            if inferred is not None:
                res.inferred = True
                res.device = inferred
                res.disks = leaf_disks(inferred, sysfs)
                res.note = (
                    f"overlay (container root): the upper layer {upper} is a host path not "
                    f"visible here; other mounts from the same host directory tree are on "
                    f"{inferred.name}, so writes to this overlay most likely land there. "
                    f"{inferred.name}'s figures are the whole device's, shared with the host "
                    f"and other containers."
                )
                return
            res.note = _EXPLAIN["overlay-unknown"].format(**fmt)
            return
        if fstype in NFS_FS:
            res.kind = "nfs"
        elif fstype in MEMORY_FS:
            res.kind = "memory"
        elif fstype in PSEUDO_FS:
            res.kind = "pseudo"
        elif fstype == "fuse" or fstype.startswith(("fuse.", "fuseblk")):
            res.kind = "fuse"
            if fstype == "fuseblk":  # ntfs-3g and co: FUSE over a real block device
                src = _source_device(m.source, sysfs)
                if src is not None:
                    res.kind = "block"
                    _from_device(res, src, sysfs, self)
                    return
        elif fstype in NETWORK_FS:
            res.kind = "network"
        res.note = _EXPLAIN[res.kind].format(**fmt)


def resolve(path: str) -> Resolution:
    """Resolve one path on the live system; UserError (exit 2) if it does not exist."""
    return Resolver.live().resolve(path)
