"""Reading one file of SRC for a shard: through a descriptor judged by `access` (a root pack
reads only what SRC's owner could), in chunks, failing loudly when the file changed since the
scan (a shard must hold what the manifest's scan saw, or nothing)."""

from __future__ import annotations

import os
from collections.abc import Iterator

from diskinfo.shards.pack.access import Owner, check_open
from diskinfo.shards.pack.scan import Member

CHUNK = 1 << 20


class SourceError(Exception):
    """A source file failed while being copied (kept apart from DEST's write errors)."""


def open_source(path: str, owner: Owner | None) -> int:
    """SRC's file for reading, links followed (on purpose) but never, as root, out of root's
    own trees (`access`); O_NONBLOCK so that a FIFO swapped in after the scan cannot hang
    the pack."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    try:
        if (why := check_open(fd, path, owner)) is not None:
            raise SourceError(why)
    except BaseException:
        os.close(fd)
        raise
    return fd  # the caller closes it


def read_source(member: Member, owner: Owner | None) -> Iterator[bytes]:
    """The member's bytes, exactly `member.size` of them, in chunks of at most CHUNK."""
    fd = open_source(member.path, owner)
    try:
        yield from read_opened(fd, member)
    finally:
        os.close(fd)


def read_opened(fd: int, member: Member) -> Iterator[bytes]:
    """`read_source` of a file `open_source` opened already; the caller closes `fd`."""
    if os.fstat(fd).st_size != member.size:
        raise SourceError(f"{member.path} changed while being packed; re-run to pack it again")
    left = member.size
    while left:
        try:
            data = os.read(fd, min(CHUNK, left))
        except OSError as exc:
            raise SourceError(f"cannot read {member.path}: {exc.strerror}") from None
        if not data:
            raise SourceError(f"{member.path} shrank while being packed; re-run to pack it again")
        left -= len(data)
        yield data
