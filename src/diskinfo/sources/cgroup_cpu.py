"""The process's own cgroup CPU figures: usage, quota and throttling (v1 and v2).

A container's verdict must rest on its own CPU, not the shared host's: another container
saturating the host does not make this one's loader CPU-bound, and a container held to a
2-core quota is CPU-saturated at 2 cores even on an idle 64-core host. Formats
(Documentation/admin-guide/cgroup-v2.rst, cgroup-v1/cpuacct.rst, scheduler/sched-bwc.rst):

- v2 cpu.stat: `usage_usec 123`, `nr_periods 4`, `nr_throttled 1`, `throttled_usec 50`, ...
- v2 cpu.max: `max 100000` (no quota) or `50000 100000` (quota and period, microseconds)
- v1 cpuacct.usage: nanoseconds, one number
- v1 cpu.cfs_quota_us (`-1`: no quota), cpu.cfs_period_us, cpu.stat (`nr_periods 4`, ...)
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from diskinfo.sources import ParseError
from diskinfo.sources.cgroup import Membership, _join, v1_mount, v2_mount
from diskinfo.sources.mountinfo import Mount
from diskinfo.sources.procfile import ProcFile


@dataclass(frozen=True)
class CpuLocation:
    """Where this cgroup's CPU files are: one v2 directory, or v1 cpuacct and cpu directories."""

    version: int
    usage_dir: str  # v2: the unified directory; v1: the cpuacct controller's
    quota_dir: str  # v2: the same; v1: the cpu controller's
    path: str  # the cgroup path from /proc/self/cgroup ("/" at the root: the whole host)


@dataclass(frozen=True)
class CpuSample:
    """Cumulative figures at one moment."""

    usage_s: float  # CPU time used by the cgroup, seconds
    periods: int = 0
    throttled: int = 0
    quota_cores: float | None = None  # quota / period; None: no quota


def parse_keyed(text: str, what: str) -> dict[str, int]:
    """`key value` lines (cpu.stat) -> {key: value}; a non-numeric value raises ParseError."""
    out: dict[str, int] = {}
    for line in text.split("\n"):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[1].isdigit():
            raise ParseError(f"{what}: expected `key number`, got {line!r}")
        out[parts[0]] = int(parts[1])
    return out


def parse_cpu_max(text: str) -> float | None:
    """v2 cpu.max -> cores allowed (quota / period), None for `max`."""
    parts = text.split()
    if len(parts) not in (1, 2):
        raise ParseError(f"cpu.max: expected `QUOTA [PERIOD]`, got {text.strip()!r}")
    if parts[0] == "max":
        return None
    period = parts[1] if len(parts) == 2 else "100000"
    if not parts[0].isdigit() or not period.isdigit() or int(period) == 0:
        raise ParseError(f"cpu.max: bad numbers in {text.strip()!r}")
    return int(parts[0]) / int(period)


def parse_v1_quota(quota: str, period: str) -> float | None:
    """v1 cpu.cfs_quota_us and cpu.cfs_period_us -> cores allowed, None for -1."""
    q, p = quota.strip(), period.strip()
    if q == "-1":
        return None
    if not q.isdigit() or not p.isdigit() or int(p) == 0:
        raise ParseError(f"cpu.cfs_quota_us/period: bad numbers {q!r}/{p!r}")
    return int(q) / int(p)


def parse_v1_usage(text: str) -> float:
    """v1 cpuacct.usage (nanoseconds) -> seconds."""
    value = text.strip()
    if not value.isdigit():
        raise ParseError(f"cpuacct.usage: expected a number, got {value!r}")
    return int(value) / 1e9


def locate_cpu(memberships: list[Membership], mounts: list[Mount]) -> CpuLocation | None:
    """v1 cpuacct (+ cpu for the quota) where mounted, else the v2 directory."""
    acct = next((m for m in memberships if "cpuacct" in m.controllers), None)
    acct_mount = v1_mount(mounts, "cpuacct")
    if acct is not None and acct_mount is not None:
        cpu = next((m for m in memberships if "cpu" in m.controllers), acct)
        cpu_mount = v1_mount(mounts, "cpu") or acct_mount
        return CpuLocation(1, _join(acct_mount, acct.path), _join(cpu_mount, cpu.path), acct.path)
    v2 = next((m for m in memberships if m.v2), None)
    mount = v2_mount(mounts)
    if v2 is not None and mount is not None:
        directory = _join(mount, v2.path)
        return CpuLocation(2, directory, directory, v2.path)
    return None


# read every sample: kept open and pread, as the /proc files (by directory and name: no path
# to join each time)
_OPEN: dict[tuple[str, str], ProcFile] = {}


def _text(directory: str, name: str) -> str:
    f = _OPEN.get((directory, name))
    if f is None:
        f = _OPEN[directory, name] = ProcFile(os.path.join(directory, name), encoding="ascii")
    return f.read()


def read_quota(loc: CpuLocation) -> float | None:
    """The quota in cores (None: none). It changes rarely (docker update), so the monitor
    reads it every few seconds, not every sample. A missing quota file (the cpu controller
    not enabled for the group) means no quota; OSError otherwise, ParseError if malformed."""
    try:
        if loc.version == 2:
            return parse_cpu_max(_text(loc.quota_dir, "cpu.max"))
        return parse_v1_quota(
            _text(loc.quota_dir, "cpu.cfs_quota_us"), _text(loc.quota_dir, "cpu.cfs_period_us")
        )
    except FileNotFoundError:
        return None


def read_sample(loc: CpuLocation, quota: float | None) -> CpuSample:
    """One reading under the given quota; OSError when a file is gone, ParseError when one
    is malformed. v1 keeps throttling in a second file, read only under a quota: without
    one the kernel counts no periods."""
    if loc.version == 2:
        stat = parse_keyed(_text(loc.usage_dir, "cpu.stat"), "cpu.stat")
        if "usage_usec" not in stat:
            raise ParseError("cpu.stat: no usage_usec")
        return CpuSample(
            stat["usage_usec"] / 1e6, stat.get("nr_periods", 0), stat.get("nr_throttled", 0), quota
        )
    usage = parse_v1_usage(_text(loc.usage_dir, "cpuacct.usage"))
    stat: dict[str, int] = {}
    if quota is not None:
        with contextlib.suppress(FileNotFoundError):
            stat = parse_keyed(_text(loc.quota_dir, "cpu.stat"), "cpu.stat")
    return CpuSample(usage, stat.get("nr_periods", 0), stat.get("nr_throttled", 0), quota)
