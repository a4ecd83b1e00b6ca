"""`diskinfo resolve PATH...`: print the chain from each path down to its physical disks."""

from __future__ import annotations

import argparse
import json
from typing import Any

from diskinfo.collectors.rates import await_ms, nfs_counters
from diskinfo.resolve import Resolution, Resolver
from diskinfo.sources import mountstats
from diskinfo.sources.sysfs import BlockInfo
from diskinfo.units import format_size


def nfs_stats(mountpoint: str) -> dict[str, Any] | None:
    """The mount's cumulative NFS figures (the monitor's counters), None when unreadable."""
    try:
        mounts, _ = mountstats.parse(mountstats.read())
    except OSError:
        return None
    for m in reversed(mounts):
        if m.mountpoint == mountpoint:
            c = nfs_counters(m)
            return {
                "server": m.server,
                "age_s": m.age,
                "bytes": m.bytes,
                "read_bytes": c["read_bytes"],
                "write_bytes": c["write_bytes"],
                "read_ops": c["read_ops"],
                "write_ops": c["write_ops"],
                "read_rtt_ms_avg": await_ms(c["read_rtt_ms"], c["read_ops"]),
                "write_rtt_ms_avg": await_ms(c["write_rtt_ms"], c["write_ops"]),
            }
    return None


def describe(info: BlockInfo) -> str:
    """One human phrase for a device: `sda1 (partition of sda)`, `dm-0 (LVM vg0-data)`."""
    extra: list[str] = []
    if info.partition:
        extra.append(f"partition of {info.parent}")
    if info.kind == "dm":
        uuid = info.dm_uuid or ""
        label = "LVM" if uuid.startswith("LVM-") else "dm-crypt" if "CRYPT" in uuid else "dm"
        extra.append(f"{label} {info.dm_name}" if info.dm_name else label)
    if info.kind == "md":
        extra.append(f"md {info.md_level}" if info.md_level else "md")
    if info.kind == "loop":
        extra.append(f"loop of {info.loop_backing}" if info.loop_backing else "loop")
    if info.kind == "nvme":
        extra.append("NVMe namespace")
    if info.model:
        extra.append(info.model)
    if info.rotational is not None and info.kind not in ("dm", "md", "loop"):
        extra.append("rotational" if info.rotational else "non-rotational")
    if info.size_bytes:
        extra.append(format_size(info.size_bytes, binary=True))
    tail = f" ({', '.join(extra)})" if extra else ""
    return f"{info.name} [{info.devno}]{tail}"


def format_text(res: Resolution, indent: str = "") -> list[str]:
    """The chain as indented lines, as `diskinfo resolve` prints it."""
    m = res.mount
    lines = [f"{indent}{res.path}"]
    if res.realpath != res.path:
        lines.append(f"{indent}  realpath {res.realpath}")
    bind = f" (bind of {m.root})" if m.root not in ("/", "") else ""
    if not res.node:
        lines.append(f"{indent}  mount    {m.mountpoint}{bind}  {m.fstype} {m.source} [{m.devno}]")
    if res.device is not None:
        tag = "device*  " if res.inferred else "device   "
        lines.append(f"{indent}  {tag}{describe(res.device)}")
    for member in res.members:
        lines.append(f"{indent}  member   {describe(member)}")
    shown = {b.name for b in res.members} | ({res.device.name} if res.device else set())
    for disk in res.disks:
        if disk.name not in shown:
            lines.append(f"{indent}  disk     {describe(disk)}")
    if res.backing is not None and res.kind == "block":
        lines.append(f"{indent}  backing  (the loop device's file)")
        lines.extend(format_text(res.backing, indent + "    "))
    if res.note:
        lines.append(f"{indent}  note     {res.note}")
    if res.measurable:
        lines.append(f"{indent}  watch    {', '.join(res.watch_devices)}")
    else:
        lines.append(f"{indent}  watch    nothing: no block device to measure")
    for w in res.warnings:
        lines.append(f"{indent}  warning  {w}")
    return lines


def nfs_line(stats: dict[str, Any]) -> str:
    return (
        f"  nfs      read {stats['read_bytes']} B in {stats['read_ops']} READs "
        f"(rtt {stats['read_rtt_ms_avg']:.2f} ms), written {stats['write_bytes']} B in "
        f"{stats['write_ops']} WRITEs (rtt {stats['write_rtt_ms_avg']:.2f} ms)"
    )


def run(args: argparse.Namespace) -> int:
    resolver = Resolver.live()
    results = [resolver.resolve(path) for path in args.paths]  # UserError: exit 2
    if args.json:
        out = []
        for res in results:
            item = res.to_dict()
            if res.kind == "nfs":
                item["nfs"] = nfs_stats(res.mount.mountpoint)
            out.append(item)
        print(json.dumps(out if len(out) > 1 else out[0], indent=2))
        return 0
    for i, res in enumerate(results):
        if i:
            print()
        print("\n".join(format_text(res)))
        if res.kind == "nfs":
            stats = nfs_stats(res.mount.mountpoint)
            if stats:
                print(nfs_line(stats))
    return 0
