"""Where the container's work lands and how it is reached, for the banner: the mounts under
/workspace (what outlives the container, which of them NB_USER cannot write) and whether the
container shares the host's network (its ports and name are then the host's)."""

from __future__ import annotations

import grp
import os
import re

# The network devices a container's own network namespace holds: Docker's and Kubernetes'
# eth0, eth1, ... and the fallback tunnels the kernel adds to every namespace where their
# module is loaded. Any other (docker0, ens3, bond0, ...) is the host's namespace.
NAMESPACE_DEVICES = re.compile(
    r"lo|eth\d+|tunl0|sit0|ip6tnl0|ip_vti0|ip6_vti0|gre0|gretap0|erspan0|ip6gre0|ip6gretap0"
)


def host_network(devices: list[str] | None = None) -> bool:
    """Whether this network namespace is the host's, from its devices (/sys/class/net): a
    device no container namespace holds says so. A host with only lo and eth0 reads as not
    known (False), and the banner then says how to find the port instead of a wrong one."""
    if devices is None:
        try:
            devices = os.listdir("/sys/class/net")
        except OSError:
            devices = []
    return any(not NAMESPACE_DEVICES.fullmatch(name) for name in devices)


def writable_by(st: os.stat_result, uid: int, gids: set[int]) -> bool:
    """Whether uid (in groups gids) may create files in a folder of this stat (its mode bits;
    an ACL the mode does not show is not read)."""
    if st.st_uid == uid:
        return bool(st.st_mode & 0o200)
    if st.st_gid in gids:
        return bool(st.st_mode & 0o020)
    return bool(st.st_mode & 0o002)


def unwritable_mounts(mountinfo: str, user: str, uid: str, gid: str) -> list[tuple[str, int]]:
    """(mount point, owner) of the read-write mounts at or under /workspace that the user
    (uid, primary gid, and the groups naming it) cannot write; a read-only one is meant so."""
    gids = {int(gid), *(g.gr_gid for g in grp.getgrall() if user in g.gr_mem)}
    out = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 6 or "ro" in fields[5].split(","):
            continue
        points = workspace_mounts(line)  # this line's mount point, if under /workspace
        if not points:
            continue
        point = points[0]
        try:
            st = os.stat(point)
        except OSError:
            continue
        if not writable_by(st, int(uid), gids):
            out.append((point, st.st_uid))
    return sorted(set(out))


def persist_line(mounts: list[str] | None, workspace: str = "/workspace") -> str | None:
    """Where work outlives the container: a notebook saved in /workspace itself (no mount)
    is lost with `docker run --rm`, and nothing said so."""
    if mounts is None or workspace in mounts:
        return None
    if not mounts:
        return (
            f"Persists   nothing under {workspace} is mounted: files saved there (notebooks "
            'too) go with the container; mount a folder, e.g. -v "$PWD:/workspace/code"'
        )
    return (
        f"Persists   only {', '.join(sorted(mounts))} (mounted from the host): save notebooks "
        f"there; the rest of {workspace} goes with the container"
    )


def workspace_mounts(mountinfo: str, workspace: str = "/workspace") -> list[str]:
    """Mount points at or under `workspace`, from /proc/self/mountinfo's text (the fifth
    field; octal escapes such as \\040 for a space decoded)."""
    out = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if point == workspace or point.startswith(workspace + "/"):
            out.append(point)
    return sorted(set(out))
