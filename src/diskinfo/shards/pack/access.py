"""What a pack running as root may read: only files in trees root alone controls.

The `diskinfo` program never packs as root in a user's tree (`privileges`): started as root it
becomes NB_USER, and kept root (`--as-root`, or no NB_USER on a host) it refuses a SRC or DEST
another account could write. SRC's links are still followed on purpose (ImageFolder layouts
are made of them), and a link in root's SRC may lead into a user's tree, where that user can
swap the file for a link to /etc/shadow between the scan and the read. So a pack that runs as
root (that program, or a caller in-process) judges every directory and file by
`fileio.not_root_only` (every component of its resolved path, by descriptor, never following a
link): at scan time, and again on the descriptor it reads through (`/proc/self/fd`), so a link
swapped after the scan is judged by what was opened. Run as a user, the kernel's own checks are
the rule and nothing here applies.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from diskinfo.errors import UserError
from diskinfo.fileio import RootOnlyTrees, not_root_only


class Owner:
    """The rule a pack running as root keeps to: root's own trees only (folders walked once)."""

    def __init__(self) -> None:
        self.trees = RootOnlyTrees()


def source_owner(src: Path) -> Owner | None:
    """The rule for this process: None when not root; else SRC must be root's alone."""
    if os.geteuid() != 0:
        return None
    if (part := not_root_only(src)) is not None:
        raise UserError(refusal(str(src), part))
    return Owner()


def refusal(path: str, part: str) -> str:
    return (
        f"cannot read {path}: {part} is writable by an account other than root, and a pack "
        "running as root reads only what root alone controls (run it as that user)"
    )


def check_dir(path: str, owner: Owner | None) -> None:
    """Refuse a directory (reached through a link, say) outside root's own trees."""
    if owner is None:
        return
    if (part := not_root_only(path)) is not None:
        raise UserError(refusal(path, part))


def check_file(path: str, st: os.stat_result, owner: Owner | None) -> None:
    """Refuse, at scan time, a file outside root's own trees (checked again when opened)."""
    if owner is None:
        return
    if (part := owner.trees.problem(os.path.realpath(path), st)) is not None:
        raise UserError(refusal(path, part))


def check_open(fd: int, path: str, owner: Owner | None) -> str | None:
    """None when what `fd` (opened from `path`) is lies in root's own trees, else why not.
    Judged on the descriptor and the path the kernel reports for it, so a link swapped after
    the scan is judged by what was actually opened."""
    if owner is None:
        return None
    st = os.fstat(fd)
    real = os.readlink(f"/proc/self/fd/{fd}")
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is no longer a regular file"
    if (part := owner.trees.problem(real, st)) is not None:
        return refusal(path, part)
    return None
