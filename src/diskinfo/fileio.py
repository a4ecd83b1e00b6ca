"""Writing a file so that a concurrent reader sees the old content or the new, never half."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` survive a power cut (where the filesystem allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def dir_owner(directory: Path) -> tuple[int, int] | None:
    """(uid, gid) that files root writes into `directory` should get, None when not root. A
    container runs its one-off commands (`docker run --entrypoint diskinfo`, `docker exec`) as
    root; what they write into the user's mounted folders must stay the user's to delete."""
    if os.geteuid() != 0:
        return None
    st = os.stat(directory)
    return st.st_uid, st.st_gid


def make_dirs(path: Path) -> None:
    """mkdir -p; run as root, each directory made gets the owner of the one it is made in."""
    path = Path(path)
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir()
        if (ids := dir_owner(directory.parent)) is not None:
            os.chown(directory, *ids)


def write_atomic(
    path: Path, data: str | bytes, mode: int = 0o644, durable: bool = False, owned: bool = False
) -> None:
    """Temp file in the same directory, then rename over `path`. `durable` also fsyncs the file
    and its directory (for state a crash must not lose); the temp file never outlives a failure.
    The rename replaces whatever `path` is (a planted link is replaced, never followed).
    `owned`: run as root, the file gets the directory's owner (a report written by a root
    container into the user's logs directory stays the user's)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as handle:
            handle.write(data)
            if owned and (ids := dir_owner(path.parent)) is not None:
                os.fchown(handle.fileno(), *ids)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)
