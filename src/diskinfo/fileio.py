"""Writing files in folders another user may control, so that nothing can be redirected.

A folder the user owns (`/workspace/logs`, a pack's DEST) is theirs to fill with links while a
root `docker exec ... diskinfo` writes there. So every write here works on descriptors only:
the folder is opened once, a file is created in it with `O_CREAT|O_EXCL|O_NOFOLLOW` (a planted
name makes the create fail, a link is never followed), its mode and owner are changed with
`fchmod`/`fchown` on that descriptor, and it is renamed or removed relative to the folder's
descriptor. No call here takes a path to a file the user could have replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

CREATE_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TEMP_TRIES = 100  # names taken by someone else before we give up (mkstemp's TMP_MAX is 10000)


def fsync_dir(directory: Path | int) -> None:
    """Make a rename in `directory` (a path or a folder descriptor) survive a power cut, where
    the filesystem allows it."""
    if isinstance(directory, int):
        with contextlib.suppress(OSError):
            os.fsync(directory)
        return
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def open_dir(directory: Path | str) -> int:
    """A descriptor of the folder the caller named (a link the caller gave is theirs to give;
    what is inside is reached relative to this descriptor from here on)."""
    return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


@contextlib.contextmanager
def opened_dir(directory: Path | str) -> Iterator[int]:
    fd = open_dir(directory)
    try:
        yield fd
    finally:
        os.close(fd)


def owner_of(dir_fd: int) -> tuple[int, int] | None:
    """(uid, gid) that files root writes into the folder should get, None when not root. A
    container runs its one-off commands (`docker run --entrypoint diskinfo`, `docker exec`) as
    root; what they write into the user's mounted folders must stay the user's to delete."""
    if os.geteuid() != 0:
        return None
    st = os.fstat(dir_fd)
    return st.st_uid, st.st_gid


def dir_owner(directory: Path) -> tuple[int, int] | None:
    """`owner_of` for a folder named by path (read-only: only its owner is looked at)."""
    if os.geteuid() != 0:
        return None
    with opened_dir(directory) as fd:
        return owner_of(fd)


def _random_part() -> str:
    """8 hex digits from the kernel's random source, as secrets.token_hex(4) gives them;
    `secrets` is not imported for it: it loads hashlib and OpenSSL's libcrypto, 3.8 MiB of a
    monitor that never hashes (benchmarks/results/monitor_memory.md)."""
    return os.urandom(4).hex()


def create_temp(
    dir_fd: int, prefix: str, suffix: str = ".tmp", mode: int = 0o600
) -> tuple[int, str]:
    """A new file `PREFIX<random>SUFFIX` in the folder, created here and now (never an existing
    name, never through a link): (read-write descriptor, name relative to the folder)."""
    for _ in range(TEMP_TRIES):
        name = f"{prefix}{_random_part()}{suffix}"
        try:
            return os.open(name, CREATE_FLAGS, mode, dir_fd=dir_fd), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name {prefix}*{suffix}")


def unlink_quietly(dir_fd: int, name: str) -> None:
    """Remove `name` (a link itself, never its target) if it is there."""
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dir_fd)


def make_dirs(path: Path) -> None:
    """mkdir -p; run as root, each directory made gets the owner of the one it is made in,
    given through a descriptor of the new directory opened without following a link."""
    path = Path(path)
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        with opened_dir(directory.parent) as parent:
            with contextlib.suppress(FileExistsError):  # made meanwhile: opened as any other
                os.mkdir(directory.name, 0o777, dir_fd=parent)
            if (ids := owner_of(parent)) is not None:
                fd = os.open(
                    directory.name,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=parent,
                )
                try:
                    os.fchown(fd, *ids)
                finally:
                    os.close(fd)


def write_atomic(
    path: Path, data: str | bytes, mode: int = 0o644, durable: bool = False, owned: bool = False
) -> None:
    """A new temp file in the same folder, then renamed over `path`: a reader sees the old
    content or the new, never half. `durable` also fsyncs the file and its folder (for state a
    crash must not lose); the temp file never outlives a failure. The rename replaces whatever
    `path` is (a planted link is replaced, never followed). `owned`: run as root, the file
    gets the folder's owner (a report written by a root container into the user's logs
    directory stays the user's). Mode and owner are set on the descriptor, never by name."""
    path = Path(path)
    payload = data.encode() if isinstance(data, str) else data
    with opened_dir(path.parent) as dir_fd:
        fd, tmp = create_temp(dir_fd, f".{path.name}.")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(payload)
                handle.flush()
                os.fchmod(fd, mode)
                if owned and (ids := owner_of(dir_fd)) is not None:
                    os.fchown(fd, *ids)
                if durable:
                    os.fsync(fd)
            os.replace(tmp, path.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            unlink_quietly(dir_fd, tmp)
            raise
        if durable:
            fsync_dir(dir_fd)


def open_regular(path: Path | str, follow: bool = True) -> int:
    """A read descriptor of a regular file: a FIFO or a device is never waited on (opened
    with O_NONBLOCK, then refused as an OSError), so a file planted in its place cannot hang
    the reader. `follow=False`: a link is an OSError (ELOOP) too."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def read_regular(path: Path | str, cap: int) -> bytes:
    """The content of a regular file another user may have named: a link (ELOOP), a FIFO or
    a device (`open_regular`) is an OSError, and more than `cap` bytes is one too, so a
    planted file can neither hang nor flood the reader."""
    fd = open_regular(path, follow=False)
    try:
        data = os.read(fd, cap + 1)
        if len(data) > cap:
            raise OSError(errno.EFBIG, f"larger than {cap} bytes", str(path))
        return data
    finally:
        os.close(fd)


def _others_may_write(st: os.stat_result) -> bool:
    """Whether an account other than root could change this inode (write into it, or, as its
    owner, chmod it)."""
    return st.st_uid != 0 or bool(st.st_mode & 0o002) or bool(st.st_mode & 0o020 and st.st_gid)


def _walk_root_only(path: str, links_end_walk: bool) -> str | None:
    """Walk the absolute `path` from `/` with O_PATH|O_NOFOLLOW descriptors, each component
    opened relative to the one above: the first prefix another account could change, or None.
    A component may sit in a folder others write only when that folder is sticky and the
    component is root's (/tmp/root-folder); the last one must be root's alone. A link ends the
    walk when `links_end_walk` (the named path: the folder holding it is root's alone, and
    where it leads is the resolved path's walk), else it is an answer (a resolved path holds
    no link unless someone swapped one in meanwhile)."""
    parts = [p for p in path.split("/") if p]
    flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", flags | os.O_DIRECTORY)
    where = "/"
    try:
        st = os.fstat(fd)
        for i, name in enumerate(parts):
            try:
                child = os.open(name, flags, dir_fd=fd)
            except OSError:
                return os.path.join(where, name)
            os.close(fd)
            fd, parent, st = child, st, os.fstat(child)
            if _others_may_write(parent) and not (parent.st_mode & stat.S_ISVTX and st.st_uid == 0):
                return where
            where = os.path.join(where, name)
            if stat.S_ISLNK(st.st_mode):
                return None if links_end_walk else where
            if not stat.S_ISDIR(st.st_mode) and i < len(parts) - 1:
                return where
        return where if _others_may_write(st) else None
    finally:
        os.close(fd)


def not_root_only(path: Path | str) -> str | None:
    """The first part of `path` an account other than root could write, replace or swap for a
    link (so root acting on `path` would act where that account chooses), or None when root
    alone controls all of it. Both the path as named and as resolved are checked, every
    component by descriptor, never following a link; a path that does not exist yet is judged
    by the nearest folder above it that does (where it would be made). Nothing is opened for
    reading: a FIFO or a device on the way cannot block."""
    named = os.path.abspath(path)
    while not os.path.lexists(named) and named != "/":
        named = os.path.dirname(named)
    real = os.path.realpath(named)
    return _walk_root_only(named, links_end_walk=True) or _walk_root_only(
        real, links_end_walk=False
    )


class RootOnlyTrees:
    """`not_root_only` for many files below few folders (a pack's SRC): each folder is walked
    once. Sound because a folder root alone controls cannot change under us."""

    def __init__(self) -> None:
        self._folders: dict[str, str | None] = {}

    def problem(self, real_path: str, st: os.stat_result) -> str | None:
        """For a file whose resolved path and stat (of what was opened) are given."""
        folder = os.path.dirname(real_path)
        if folder not in self._folders:
            self._folders[folder] = not_root_only(folder)
        if (found := self._folders[folder]) is not None:
            return found
        return real_path if _others_may_write(st) else None
