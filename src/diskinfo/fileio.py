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
            if owned and os.geteuid() == 0:
                st = os.stat(path.parent)
                os.fchown(handle.fileno(), st.st_uid, st.st_gid)
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
