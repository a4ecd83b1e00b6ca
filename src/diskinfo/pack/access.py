"""What a root-run pack may read from SRC: only what the owner of SRC could read.

SRC's links are followed on purpose (ImageFolder layouts are made of them), and root reads
everything: a link to /etc/shadow in a user's SRC would land in the user's shards. So when the
pack runs as root on a SRC someone else owns, each file is checked, on the descriptor it is
read through, against the permissions of SRC's owner (their uid, primary and supplementary
groups): the file's read bit and the search bit of every directory on its real path. POSIX
ACLs are not consulted: a file readable only through an ACL entry is refused (loudly).
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass, field
from pathlib import Path

from diskinfo.errors import UserError

R, X = 4, 1  # the read and search bits of one rwx triple


@dataclass
class Owner:
    """SRC's owner, as the kernel would judge their access."""

    uid: int
    gids: frozenset[int]
    searchable: dict[str, bool] = field(default_factory=dict)  # directory -> may pass, cached

    def may(self, st: os.stat_result, bit: int) -> bool:
        if self.uid == 0:
            return True
        if st.st_uid == self.uid:
            shift = 6
        elif st.st_gid in self.gids:
            shift = 3
        else:
            shift = 0
        return bool((st.st_mode >> shift) & bit)

    def may_pass(self, directory: str) -> bool:
        """Whether the owner may reach files below `directory` (search bit of it and of every
        directory above it)."""
        if (known := self.searchable.get(directory)) is not None:
            return known
        parent = os.path.dirname(directory)
        ok = parent == directory or self.may_pass(parent)
        if ok:
            try:
                ok = self.may(os.stat(directory), X)
            except OSError:
                ok = False
        self.searchable[directory] = ok
        return ok

    def describe(self) -> str:
        try:
            return f"{pwd.getpwuid(self.uid).pw_name} (uid {self.uid})"
        except KeyError:
            return f"uid {self.uid}"


def source_owner(src: Path) -> Owner | None:
    """The owner whose access a root pack keeps to; None when not root or SRC is root's."""
    if os.geteuid() != 0:
        return None
    st = os.stat(src)
    if st.st_uid == 0:
        return None
    try:
        entry = pwd.getpwuid(st.st_uid)
        gids = frozenset(os.getgrouplist(entry.pw_name, entry.pw_gid))
    except KeyError:
        gids = frozenset({st.st_gid})  # no account: only the group SRC itself carries
    return Owner(st.st_uid, gids)


def refusal(path: str, owner: Owner) -> str:
    return (
        f"cannot read {path}: {owner.describe()}, the owner of SRC, may not read it (a pack "
        "run as root reads only what SRC's owner could)"
    )


def check_dir(path: str, owner: Owner | None) -> None:
    """Refuse a directory (reached through a link, say) SRC's owner could not list."""
    if owner is None:
        return
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    if not (owner.may(st, R) and owner.may(st, X) and owner.may_pass(os.path.dirname(real))):
        raise UserError(refusal(path, owner))


def check_file(path: str, st: os.stat_result, owner: Owner | None) -> None:
    """Refuse, at scan time, a file SRC's owner could not read (checked again when opened)."""
    if owner is None:
        return
    if not (owner.may(st, R) and owner.may_pass(os.path.dirname(os.path.realpath(path)))):
        raise UserError(refusal(path, owner))


def check_open(fd: int, path: str, owner: Owner | None) -> str | None:
    """None when SRC's owner may read what `fd` (opened from `path`) is, else why not. Judged
    on the descriptor and the path the kernel reports for it, so a link swapped after the
    scan is judged by what was actually opened."""
    if owner is None:
        return None
    st = os.fstat(fd)
    real = os.readlink(f"/proc/self/fd/{fd}")
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is no longer a regular file"
    if not owner.may(st, R) or not owner.may_pass(os.path.dirname(real)):
        return refusal(path, owner)
    return None
