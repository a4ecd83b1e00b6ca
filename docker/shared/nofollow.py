"""Walking to a path as root without following a link the unprivileged user could have made.

NB_USER can write /workspace and their home, so a root step that walks there by name can be
sent to /etc/shadow by a planted link. The walk here goes one component at a time with
O_NOFOLLOW from a directory descriptor, and follows a symbolic link only where NB_USER cannot
have made it (a root-owned link in a root-owned directory nobody else can write, such as
/var/run, or a sticky one of root's).
"""

from __future__ import annotations

import os
import stat


class Refused(Exception):
    """A path root must not use; the message is one line for the user."""


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_HOPS = 40


def _trusted(st: os.stat_result) -> bool:
    """Made by root, and nobody else can change it (no group/other write)."""
    return st.st_uid == 0 and not st.st_mode & 0o022


def _safe_parent(st: os.stat_result) -> bool:
    """A directory where only root can replace root's entries: trusted, or root's and sticky
    (as /tmp, or a Kubernetes secret volume with its ..data links)."""
    return _trusted(st) or (st.st_uid == 0 and bool(st.st_mode & stat.S_ISVTX))


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def open_dir(path: str, create: bool = False) -> int:
    """A descriptor of directory `path`, reached without following any link NB_USER could make.

    Missing components are created (root-owned, 0755) when `create`. Raises Refused for a
    component that is an untrusted symbolic link or not a directory.
    """
    if not path.startswith("/"):
        raise Refused(f"{path} is not an absolute path")
    fd = os.open("/", DIR_FLAGS)
    parents = [fd]
    todo, seen, hops = _components(path), "", 0
    try:
        while todo:
            name = todo.pop(0)
            if name == "..":
                if len(parents) > 1:
                    os.close(parents.pop())
                seen = seen.rsplit("/", 1)[0]
                continue
            here = parents[-1]
            try:
                st = os.stat(name, dir_fd=here, follow_symlinks=False)
            except FileNotFoundError:
                if not create:
                    raise Refused(f"{seen}/{name} does not exist") from None
                os.mkdir(name, 0o755, dir_fd=here)
                st = os.stat(name, dir_fd=here, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                if not (st.st_uid == 0 and _safe_parent(os.fstat(here))):
                    raise Refused(
                        f"{seen}/{name} is a symbolic link in a directory others can write"
                    )
                hops += 1
                if hops > MAX_HOPS:
                    raise Refused(f"{path}: too many symbolic links")
                target = os.readlink(name, dir_fd=here)
                if target.startswith("/"):
                    while len(parents) > 1:
                        os.close(parents.pop())
                    seen = ""
                todo = _components(target) + todo
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise Refused(f"{seen}/{name} is not a directory")
            parents.append(os.open(name, DIR_FLAGS, dir_fd=here))
            seen = f"{seen}/{name}"
        result = parents.pop()
    finally:
        for other in parents:
            os.close(other)
    return result


def kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISREG(mode):
        return "a file"
    return "a device"
