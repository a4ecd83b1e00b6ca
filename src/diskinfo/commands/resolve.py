"""`diskinfo resolve PATH...`: print the chain from each path down to its physical disks."""

from __future__ import annotations

import argparse
import json

from diskinfo.resolve import Resolver, format_text
from diskinfo.sources import mountstats


def _nfs_stats(mountpoint: str) -> dict | None:
    try:
        mounts, _ = mountstats.parse(mountstats.read())
    except OSError:
        return None
    for m in reversed(mounts):
        if m.mountpoint == mountpoint:
            read, write = m.ops.get("READ"), m.ops.get("WRITE")
            return {
                "server": m.server,
                "age_s": m.age,
                "bytes": m.bytes,
                "read_ops": read.ops if read else 0,
                "write_ops": write.ops if write else 0,
                "read_rtt_ms_avg": (read.rtt_ms / read.ops) if read and read.ops else 0.0,
                "write_rtt_ms_avg": (write.rtt_ms / write.ops) if write and write.ops else 0.0,
            }
    return None


def run(args: argparse.Namespace) -> int:
    resolver = Resolver.live()
    results = [resolver.resolve(path) for path in args.paths]  # UserError: exit 2
    if args.json:
        out = []
        for res in results:
            item = res.to_dict()
            if res.kind == "nfs":
                item["nfs"] = _nfs_stats(res.mount.mountpoint)
            out.append(item)
        print(json.dumps(out if len(out) > 1 else out[0], indent=2))
        return 0
    for i, res in enumerate(results):
        if i:
            print()
        print("\n".join(format_text(res)))
        if res.kind == "nfs":
            stats = _nfs_stats(res.mount.mountpoint)
            if stats:
                b = stats["bytes"]
                print(
                    f"  nfs      read {b.get('normal_read', 0) + b.get('direct_read', 0)} B in "
                    f"{stats['read_ops']} READs (rtt {stats['read_rtt_ms_avg']:.2f} ms), "
                    f"written {b.get('normal_write', 0) + b.get('direct_write', 0)} B in "
                    f"{stats['write_ops']} WRITEs (rtt {stats['write_rtt_ms_avg']:.2f} ms)"
                )
    return 0
