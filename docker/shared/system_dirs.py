"""Which folders root may hand to NB_USER: never the system's own, never one everyone shares,
never a full one of root's. Kept apart from safe_paths.py, which walks to them by descriptor:
this decides by name and by what the walk found."""

from __future__ import annotations

import os
import stat

from nofollow import Refused

# The system's own trees (FHS): a folder in them is never handed to NB_USER, whatever its
# state, nor one made inside them (LOG_DIR=/etc/sshd_config.d would give NB_USER a place
# that a root program reads). /var/tmp is the one place under /var meant for anyone.
SYSTEM_TREES = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc",
    "/root", "/sbin", "/sys", "/usr", "/var",
)  # fmt: skip
OPEN_TREES = ("/var/tmp",)
# folders everyone's things live in: only a folder of one's own below them
SHARED = ("/", "/home", "/run", "/tmp", "/var/tmp", "/dev/shm")


def under(path: str, trees: tuple[str, ...]) -> bool:
    return any(path == tree or path.startswith(tree + "/") for tree in trees)


def mount_points(mountinfo: str = "/proc/self/mountinfo") -> set[str]:
    with open(mountinfo) as f:  # field 5: the mount point, octal-escaped
        return {
            line.split()[4].encode().decode("unicode_escape") for line in f if line.count(" ") > 4
        }


def refuse_system_dir(
    real: str, st: os.stat_result | None, dir_fd: int | None, parent: os.stat_result | None = None
) -> None:
    """Refused unless `real` (links resolved) is a folder root may hand to NB_USER: never in
    the system's own trees, never a folder everyone shares (/, /tmp, /run, /home, a sticky
    one), and never an existing folder of root's with something in it unless it is a mount
    point (the operator's choice) or sits in a folder of NB_USER's (`parent`: NB_USER could
    replace it anyway). What that leaves: new folders, NB_USER's own, and empty or mounted ones
    outside the system (/workspace/logs, /run/diskinfo, /scratch/logs, a volume)."""
    if real in SHARED or (under(real, SYSTEM_TREES) and not under(real, OPEN_TREES)):
        raise Refused(
            f"{real} is a system directory: use a folder of its own, e.g. under /workspace"
        )
    if st is None or dir_fd is None:
        return
    if st.st_mode & stat.S_ISVTX:
        raise Refused(f"{real} is a shared directory (sticky, as /tmp): use a folder of its own")
    if st.st_uid != 0 or (parent is not None and parent.st_uid != 0) or real in mount_points():
        return
    if os.listdir(dir_fd):
        raise Refused(
            f"{real} is a directory of root's with files in it, not a mount point: use a folder"
            " of its own (it is handed to NB_USER)"
        )
