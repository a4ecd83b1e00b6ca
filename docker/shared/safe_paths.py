"""Root's file work in places the unprivileged user can write, without following their links.

The start-up runs as root, and NB_USER (anyone holding the Jupyter token or an SSH key) can
write /workspace and their home. A root step that opens, creates or chowns there *by name* can
be redirected by a planted symlink or hard link to /etc/shadow or into init.d. So every such
step here walks its path one component at a time with O_NOFOLLOW from a directory descriptor
and acts on descriptors (openat, fchown); a link, a FIFO or a file with a second hard link is
foreign: it is removed or refused, with one line saying so. Symbolic links are followed only
where NB_USER cannot have made them (a root-owned link in a root-owned directory nobody else
can write, such as /var/run).

  safe_paths.py logs DIR UID GID     prepare the logs directory (and the project's log files)
  safe_paths.py dir DIR UID GID      a directory owned by UID:GID (the monitor's state)
  safe_paths.py home DIR UID GID     give UID:GID everything in a home directory
  safe_paths.py read [--follow] [--max-bytes N] PATH   print a small regular file
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterator

from diskinfo import logfiles  # the image's venv: root's python3

if __name__ == "__main__":  # `python3 -I` leaves the script's root-owned folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nofollow import DIR_FLAGS, Refused, kind, open_dir
from system_dirs import mount_points, refuse_system_dir, under

# The files the image writes in LOG_DIR (and their rotated copies): these, and only these, are
# handed to NB_USER when the logs directory comes from a run with another uid.
IMAGE_LOGS = r"(?:supervisord|sshd|jupyter|train|startup|diskinfo-monitor)\.log(?:\.\d+)?"
PROJECT_LOG = re.compile(f"{IMAGE_LOGS}|{logfiles.PATTERN}")
# how often a directory swapped under root's hands is looked at again, and the errors that say
# it was swapped (gone, there again, now a link, a FIFO, a file or a folder: ELOOP from
# O_NOFOLLOW, ENOTDIR from O_DIRECTORY, EINVAL from readlink, EISDIR from unlink)
RACE_TRIES = 100
CHANGED = {errno.ENOENT, errno.EEXIST, errno.ELOOP, errno.ENOTDIR, errno.EINVAL, errno.EISDIR}


def _open_last(parent: int, name: str, path: str, notes: list[str]) -> int:
    """Descriptor of directory `name` in `parent`, made if missing, a link or file in its place
    replaced. NB_USER may be swapping it from another container while this runs (the start after
    `docker restart`): an entry that changes between the look and the open is looked at again,
    up to RACE_TRIES times, and then refused; never followed."""
    replaced: list[str] = []
    for _ in range(RACE_TRIES):
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        try:
            if st is not None and not stat.S_ISDIR(st.st_mode):
                what = kind(st.st_mode)
                if stat.S_ISLNK(st.st_mode):
                    what += f" to {os.readlink(name, dir_fd=parent)}"
                if stat.S_ISREG(st.st_mode):
                    _set_aside(parent, name)
                else:
                    os.unlink(name, dir_fd=parent)
                replaced.append(what)
                st = None
            if st is None:
                os.mkdir(name, 0o755, dir_fd=parent)
            fd = os.open(name, DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            # gone, made by someone else, or swapped for a link, FIFO or file meanwhile
            if exc.errno not in CHANGED:
                raise
            continue
        if replaced:
            again = (
                f" ({len(replaced) - 1} more time(s) as it was prepared)" if replaced[1:] else ""
            )
            notes.append(
                f"{path} was {replaced[0]}: replaced with a directory (it must be one){again}"
            )
        return fd
    raise Refused(f"{path} kept changing while it was prepared: something else replaces it")


def _set_aside(parent: int, name: str) -> None:
    """A file where a directory belongs is kept (it may be the user's), under a new name."""
    try:
        os.rename(name, f"{name}.not-a-directory", src_dir_fd=parent, dst_dir_fd=parent)
    except (IsADirectoryError, OSError) as exc:
        if exc.errno not in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
            raise
        unique = f"{name}.not-a-directory.{secrets.token_hex(4)}"
        os.rename(name, unique, src_dir_fd=parent, dst_dir_fd=parent)


def _own_dir(path: str, uid: int, gid: int, notes: list[str]) -> int:
    """Descriptor of directory `path` owned by uid:gid; a link or file in its place is replaced.
    Never a system directory (refuse_system_dir)."""
    parent_path, name = os.path.split(path.rstrip("/"))
    if name in ("", ".", ".."):
        raise Refused(f"{path} must name a directory")
    # before making any parent; the last part's own link is not followed: NB_USER may have
    # planted it (/workspace/logs -> /etc), and below it is replaced by a real directory
    refuse_system_dir(os.path.join(os.path.realpath(parent_path or "/"), name), None, None)
    parent = open_dir(parent_path or "/", create=True)
    try:
        real = os.path.join(os.readlink(f"/proc/self/fd/{parent}"), name)
        refuse_system_dir(real, None, None)
        parent_st = os.fstat(parent)
        fd = _open_last(parent, name, path, notes)
    finally:
        os.close(parent)
    st = os.fstat(fd)
    try:
        refuse_system_dir(real, st, fd, parent_st)
    except Refused:
        os.close(fd)
        raise
    if (st.st_uid, st.st_gid) != (uid, gid):
        os.fchown(fd, uid, gid)
    if st.st_mode & 0o700 != 0o700:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) | 0o700)
    return fd


def _give(dir_fd: int, name: str, uid: int, gid: int) -> str | None:
    """Hand one entry to uid:gid if it is a plain file; what was done, or None."""
    try:
        return _give_entry(dir_fd, name, uid, gid)
    except OSError as exc:  # NB_USER may be at work from another container
        if exc.errno not in CHANGED:
            raise
        return None if exc.errno == errno.ENOENT else f"left {name}: it changed while being checked"


def _give_entry(dir_fd: int, name: str, uid: int, gid: int) -> str | None:
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
        if stat.S_ISDIR(st.st_mode):
            return f"left {name}: a directory where a log file belongs"
        what = kind(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            what += f" to {os.readlink(name, dir_fd=dir_fd)}"
        elif st.st_nlink > 1:
            what = "a hard link to another file"
        os.unlink(name, dir_fd=dir_fd)
        return f"removed {name}: it was {what}, not a log file"
    if (st.st_uid, st.st_gid) == (uid, gid):
        return None
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or now.st_nlink > 1:
            return f"left {name}: it changed while being checked"
        os.fchown(fd, uid, gid)
    finally:
        os.close(fd)
    return ""


def prepare_logs(path: str, uid: int, gid: int) -> list[str]:
    """LOG_DIR as a real directory of uid:gid whose project log files uid can write."""
    notes: list[str] = []
    for _ in range(RACE_TRIES):
        fd = _own_dir(path, uid, gid, notes)
        try:
            if _writable(fd, path):
                _give_logs(fd, path, uid, gid, notes)
                return list(dict.fromkeys(notes))
        finally:
            os.close(fd)
    raise Refused(f"{path} kept changing while it was prepared: something else replaces it")


def _writable(fd: int, path: str) -> bool:
    """Whether root can make a file in the directory: False when it was removed since it was
    opened (NB_USER from another container), Refused when it cannot be written."""
    # a name nobody planted, so only the file made here is removed again (a fixed name that
    # was a directory stopped every start)
    probe = f".write-test-{secrets.token_hex(8)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        os.close(os.open(probe, flags, 0o600, dir_fd=fd))
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise Refused(
            f"{path} is not writable ({exc.strerror}); mount a writable directory there"
        ) from None
    with contextlib.suppress(FileNotFoundError):  # removed with its folder meanwhile
        os.unlink(probe, dir_fd=fd)
    return True


def _give_logs(fd: int, path: str, uid: int, gid: int, notes: list[str]) -> None:
    given = 0
    for name in sorted(os.listdir(fd)):
        if not PROJECT_LOG.fullmatch(name):
            continue
        note = _give(fd, name, uid, gid)
        if note == "":
            given += 1
        elif note:
            notes.append(f"{path}: {note}")
    if given:
        notes.append(f"{path}: {given} log file(s) of another uid are now uid {uid}'s")


def prepare_dir(path: str, uid: int, gid: int) -> list[str]:
    notes: list[str] = []
    os.close(_own_dir(path, uid, gid, notes))
    return notes


def _walk(top_fd: int) -> Iterator[tuple[int, str, os.stat_result]]:
    """(directory fd, name, lstat) for everything below top_fd, on its filesystem only."""
    dev = os.fstat(top_fd).st_dev
    for _, dirs, files, dir_fd in os.fwalk(".", dir_fd=top_fd, follow_symlinks=False):
        for name in list(dirs):
            st = _lstat(dir_fd, name)
            if st is None or st.st_dev != dev:
                dirs.remove(name)
                continue
            yield dir_fd, name, st
        for name in files:
            if (st := _lstat(dir_fd, name)) is not None:
                yield dir_fd, name, st


def _lstat(dir_fd: int, name: str) -> os.stat_result | None:
    """None for an entry removed since it was listed (NB_USER may be at work meanwhile)."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def chown_home(path: str, uid: int, gid: int) -> list[str]:
    """Everything in a home directory to uid:gid, by descriptor: symbolic links and files with
    a second hard link (which may be /etc/shadow's) are left as they are."""
    fd = open_dir(path)
    skipped = 0
    try:
        if (os.fstat(fd).st_uid, os.fstat(fd).st_gid) != (uid, gid):
            os.fchown(fd, uid, gid)
        for dir_fd, name, st in _walk(fd):
            if (st.st_uid, st.st_gid) == (uid, gid) or stat.S_ISLNK(st.st_mode):
                continue
            try:
                entry = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
            except FileNotFoundError:
                continue
            try:
                now = os.fstat(entry)
                if stat.S_ISLNK(now.st_mode):
                    continue
                if stat.S_ISREG(now.st_mode) and now.st_nlink > 1:
                    skipped += 1
                    continue
                os.chown(f"/proc/self/fd/{entry}", uid, gid)  # the very inode just checked
            finally:
                os.close(entry)
    finally:
        os.close(fd)
    return [f"{path}: {skipped} hard-linked file(s) left as they were"] if skipped else []


def give_mount(path: str, uid: int, gid: int) -> list[str]:
    """A folder mounted at or under /workspace (CHOWN_EXTRA) and all in it to uid:gid, walked
    as chown_home walks a home; anything else (the image's, outside /workspace) is refused."""
    real = os.path.normpath(path)
    if not (path.startswith("/") and under(real, ("/workspace",)) and real in mount_points()):
        raise Refused(f"{path} is not a folder you mounted at or under /workspace")
    return chown_home(real, uid, gid)


def read_small(path: str, max_bytes: int = 65536, follow: bool = False) -> bytes:
    """The content of a regular file of at most max_bytes, never blocking on a FIFO.

    follow=False (root reading a path others may write): no untrusted link on the way, and
    not a file with a second hard link.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if follow:
        fd = os.open(path, flags)
    else:
        parent_path, name = os.path.split(path)
        parent = open_dir(parent_path or "/")
        try:
            fd = os.open(name, flags | os.O_NOFOLLOW, dir_fd=parent)
        except OSError as exc:
            if exc.errno == 40:  # ELOOP: the last component is a symbolic link
                raise Refused(f"{path} is a symbolic link") from None
            raise
        finally:
            os.close(parent)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{path} is {kind(st.st_mode)}, not a regular file")
        if not follow and st.st_nlink > 1:
            raise Refused(f"{path} has another hard link")
        data = os.read(fd, max_bytes + 1)
        if len(data) > max_bytes:
            raise Refused(f"{path} is larger than {max_bytes} bytes")
        return data
    finally:
        os.close(fd)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="safe_paths.py")
    sub = parser.add_subparsers(dest="verb", required=True)
    for verb in ("logs", "dir", "home", "give"):
        p = sub.add_parser(verb)
        p.add_argument("path")
        p.add_argument("uid", type=int)
        p.add_argument("gid", type=int)
    p = sub.add_parser("read")
    p.add_argument("path")
    p.add_argument("--max-bytes", type=int, default=65536)
    p.add_argument("--follow", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.verb == "read":
            sys.stdout.buffer.write(read_small(args.path, args.max_bytes, args.follow))
            return 0
        act = {"logs": prepare_logs, "dir": prepare_dir, "home": chown_home, "give": give_mount}
        for note in act[args.verb](args.path, args.uid, args.gid):
            print(note)
    except Refused as exc:
        print(exc, file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{exc.filename or args.path}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
