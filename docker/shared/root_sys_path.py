"""Root's Python imports nothing from a folder another account can write.

Loaded at every start of the image's Python (a `.pth` line in /opt/venv's site-packages, which
the Dockerfile installs), for root only: `docker exec C python3 -m pip ...` or `python3 -c
'import torch'` typed without `-u` starts in /workspace, and Python puts that folder ('' or its
path, or a script's own folder) first on sys.path, after site has run; Python 3.10, the real
base's, has no PYTHONSAFEPATH. So this installs a finder, first on sys.meta_path, that finds
nothing itself but, before every import, drops from sys.path each entry another account could
change (the working directory, a script's folder, a PYTHONPATH=/workspace/code): the entry or
a folder above it, as named or as resolved, not root's, or writable by a group other than
root's or by everyone (a sticky folder's root-owned entries excepted). NB_USER's Pythons are
left as they are.

It uses only `os` and `sys`, loaded before any .pth line runs: anything else it imported could
itself come from such a folder (PYTHONPATH is on sys.path before site runs). diskinfo's
`fileio.not_root_only` is the same rule by descriptor, for paths diskinfo acts on.
"""

import os
import sys

STICKY, LINK, KIND = 0o1000, 0o120000, 0o170000


def _others_may_change(st: os.stat_result) -> bool:
    return st.st_uid != 0 or bool(st.st_mode & 0o002) or bool(st.st_mode & 0o020 and st.st_gid)


def _root_only(path: str, links_end_walk: bool) -> bool:
    parent = os.lstat("/")
    here = "/"
    for name in path.split("/"):
        if not name:
            continue
        here = os.path.join(here, name)
        try:
            st = os.lstat(here)
        except OSError:
            return False  # not there: nothing to import from it now, and someone may make it
        if _others_may_change(parent) and not (parent.st_mode & STICKY and st.st_uid == 0):
            return False
        if st.st_mode & KIND == LINK:
            return links_end_walk  # the folder holding it is root's; the target: resolved walk
        parent = st
    return not _others_may_change(parent)


_judged: dict = {}


def trusted(entry: str) -> bool:
    """Whether root may import from this sys.path entry ('' is the working directory)."""
    try:
        full = os.path.abspath(entry or os.curdir)
    except OSError:  # the working directory is gone
        return False
    if full not in _judged:
        try:
            _judged[full] = _root_only(full, True) and _root_only(os.path.realpath(full), False)
        except (OSError, ValueError):
            _judged[full] = False
    return _judged[full]


class RootSysPath:
    """First on sys.meta_path: keeps sys.path to trusted entries, finds nothing itself."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if os.geteuid() != 0:  # root gave up root (`diskinfo tune`): imports as the user
            return None
        if not all(trusted(entry) for entry in sys.path):
            sys.path[:] = [entry for entry in sys.path if trusted(entry)]
        return None

    @staticmethod
    def invalidate_caches():
        return None


if os.geteuid() == 0 and RootSysPath not in sys.meta_path:
    sys.meta_path.insert(0, RootSysPath)
    RootSysPath.find_spec("")
