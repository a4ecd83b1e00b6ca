"""Cores available to this container: its CPU quota, its cpuset, the host's cores, whichever
is least. One definition for the monitor (`cgroup_cpu_allowed`, which the verdict's CPU share
and its num_workers advice rest on), `diskinfo tune` (how far its num_workers ladder climbs)
and validate-cuda (its report), so that under `--cpus=2` on a 16-core host all three stop at 2.
"""

from __future__ import annotations

import os

from diskinfo.sources import ParseError, cgroup, mountinfo
from diskinfo.sources.cgroup_cpu import CpuLocation, locate_cpu, read_quota


def own_cpu_location() -> CpuLocation | None:
    """This process's cgroup CPU directories, from /proc/self (None where none is mounted)."""
    memberships = cgroup.parse_proc_cgroup(cgroup.read(cgroup.PROC_CGROUP))
    mounts, _errors = mountinfo.parse(mountinfo.read())
    return locate_cpu(memberships, mounts)


def cpuset_cores(host_cores: int) -> int:
    """Cores this process may run on (its affinity: the cgroup's cpuset), else the host's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return host_cores


def allowed_cores(quota: float | None, cpuset: int, host_cores: int) -> float:
    """Cores the cgroup may use: its quota (cores, None: none), its cpuset, the host."""
    cores = float(min(c for c in (cpuset, host_cores) if c > 0) if host_cores else cpuset)
    return min(quota, cores) if quota else cores


def available() -> float:
    """The cores this process's container may use now, read once (the monitor reads the quota
    and cpuset every few seconds itself, with `allowed_cores`)."""
    host = os.cpu_count() or 1
    quota = None
    try:
        where = own_cpu_location()
        quota = read_quota(where) if where is not None else None
    except (OSError, ParseError):
        pass  # no readable cgroup: the cpuset and the host decide
    return allowed_cores(quota, cpuset_cores(host), host)


def whole(cores: float) -> int:
    """Whole workers for `cores` (a 1.5-core quota runs one worker flat out): at least 1."""
    return max(1, int(cores))
