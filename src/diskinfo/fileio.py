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
import secrets
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


def create_temp(
    dir_fd: int, prefix: str, suffix: str = ".tmp", mode: int = 0o600
) -> tuple[int, str]:
    """A new file `PREFIX<random>SUFFIX` in the folder, created here and now (never an existing
    name, never through a link): (read-write descriptor, name relative to the folder)."""
    for _ in range(TEMP_TRIES):
        name = f"{prefix}{secrets.token_hex(4)}{suffix}"
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


def read_regular(path: Path | str, cap: int) -> bytes:
    """The content of a regular file another user may have named: a link (ELOOP), a FIFO or
    a device (never opened for blocking reads: O_NONBLOCK) is an OSError, and more than `cap`
    bytes is one too, so a planted file can neither hang nor flood the reader."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        data = os.read(fd, cap + 1)
        if len(data) > cap:
            raise OSError(errno.EFBIG, f"larger than {cap} bytes", str(path))
        return data
    finally:
        os.close(fd)
