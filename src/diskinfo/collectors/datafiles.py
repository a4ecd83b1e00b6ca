"""Where the training reads its data from: the folders of the files its processes hold open,
when no watched path covers them (the demo's dataset in /tmp, a dataset on a second disk the
user did not name). Read from /proc/PID/fd links, a few hundred readlinks every 30 s.

A process holds a sample's file open only while it reads it, so one look may find none; what is
seen is kept for the run. Python's own files (modules, shared libraries), devices, sockets,
pipes and /proc are no data."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

MAX_FDS = 512  # per process: a DataLoader worker holds a few; a crawler thousands
# not data: the interpreter's and the system's files
CODE_SUFFIXES = (".py", ".pyc", ".so", ".pth", ".json", ".log", ".lock")
SYSTEM_TREES = ("/proc", "/sys", "/dev", "/usr", "/lib", "/lib64", "/etc", "/run", "/var/lib")
# parts of a path that mark packages and caches, in any environment (a user's venv too)
CODE_PARTS = ("/site-packages/", "/dist-packages/", "/.cache/", "/pymp-")


def open_files(pid: int) -> list[str]:
    """Paths of the regular files PID holds open (what its fd links name); [] when it is gone
    or not ours to read."""
    base = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(base)[:MAX_FDS]
    except OSError:
        return []
    out = []
    for fd in fds:
        try:
            target = os.readlink(f"{base}/{fd}")
        except OSError:
            continue
        if target.startswith("/") and not target.endswith(" (deleted)"):
            out.append(target)
    return out


def _under(path: str, folder: str) -> bool:
    folder = folder.rstrip("/") or "/"
    return folder == "/" or path == folder or path.startswith(folder + "/")


def _code_trees() -> tuple[str, ...]:
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return tuple(sorted(p for p in prefixes if p)) + SYSTEM_TREES


def unwatched_folders(files: Iterable[str], watched: Iterable[str], depth: int = 2) -> set[str]:
    """The folders (the first `depth` levels of each path, /tmp/diskinfo-demo-x) of the data
    files that no watched path covers."""
    watched = [os.path.realpath(w) for w in watched]
    skip = _code_trees()
    out = set()
    for path in files:
        if path.endswith(CODE_SUFFIXES) or any(part in path for part in CODE_PARTS):
            continue
        if any(_under(path, tree) for tree in skip):
            continue
        if any(_under(path, w) for w in watched):
            continue
        parts = path.strip("/").split("/")[:-1][:depth]
        if parts:
            out.add("/" + "/".join(parts))
    return out
