"""A `diskinfo` verb run as root works as the owner of the folder it writes, as gosu would.

`docker exec CONTAINER diskinfo ...` runs as root, and the folders our verbs write (a pack's
DEST, the logs directory that holds the bench baseline, the report PNG and the tune table)
belong to the user. Root working in a user's folder has to win every race against that user's
links; the user working in their own folder has nothing to race. So before anything is read
or written, a verb run as root takes the owner of that folder (supplementary groups, group,
then user: setgroups, setresgid, setresuid, for good) and says so in one line on stderr. It
stays root only when that folder is root's, where no other user can plant anything (files are
still written by descriptor, `fileio`). Verbs that write nothing (resolve, status) are left as
they are.
"""

from __future__ import annotations

import argparse
import os
import pwd
import sys
from pathlib import Path


def written_folder(args: argparse.Namespace) -> Path | None:
    """The folder a verb writes into, as the verb itself will choose it; None: writes nothing."""
    verb = getattr(args, "command", None)
    if verb == "pack":
        return Path(args.dest)
    if verb == "bench":
        if args.no_save:
            return Path(args.path)  # its test file, made in PATH when PATH is a directory
        from diskinfo.analyse import baseline

        return (Path(args.baseline) if args.baseline else baseline.default_path()).parent
    if verb == "report":
        return Path(args.png).parent if args.png else Path(args.runs[0]).parent  # PNG beside it
    if verb == "tune":
        prefix = args.out or os.path.join(os.environ.get("LOG_DIR", "."), "diskinfo-tune")
        return Path(prefix).parent
    if verb == "watch":
        return Path(args.log_dir)
    return None


def _existing(folder: Path) -> Path:
    """The folder, or the nearest folder above it that exists (the one a missing DEST is made
    in, and so the one whose owner decides)."""
    folder = Path(os.path.abspath(folder))
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def drop_to_owner(folder: Path) -> str | None:
    """Become the owner of `folder` when root and it is not root's; the line said, or None."""
    if os.geteuid() != 0:
        return None
    where = _existing(folder)
    st = os.stat(where)
    if st.st_uid == 0:
        return None
    try:
        entry = pwd.getpwuid(st.st_uid)
        who, gid = f"{entry.pw_name} (uid {st.st_uid})", entry.pw_gid
        groups = os.getgrouplist(entry.pw_name, gid)
    except KeyError:  # a uid with no account (a host uid on a bind mount): its folder's group
        who, gid, groups = f"uid {st.st_uid}", st.st_gid, [st.st_gid]
    os.setgroups(groups)
    os.setresgid(gid, gid, gid)
    os.setresuid(st.st_uid, st.st_uid, st.st_uid)
    if entry_home := _home(st.st_uid):
        os.environ["HOME"] = entry_home  # ~ (caches, matplotlib's config) follows the user
    return (
        f"diskinfo: running as {who}, the owner of {where}: "
        "root does not write in a folder another user controls"
    )


def _home(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_dir
    except KeyError:
        return None


def drop_for(args: argparse.Namespace) -> None:
    """`drop_to_owner` for the folder the parsed verb writes (see the module docstring)."""
    folder = written_folder(args)
    if folder is None:
        return
    line = drop_to_owner(folder)
    if line is not None:
        print(line, file=sys.stderr, flush=True)
