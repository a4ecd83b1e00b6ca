"""Read SRC once in the order its files lie on disk, sorting the bytes into one spill file per
shard; each shard is then written in its shuffled order from its spill.

The shuffle scatters a shard's samples all over SRC: reading them shard by shard is one random
read per file, the very pattern a pack exists to remove (6x the time of `tar -cf` of the same
200,000 files). Files are read here in inode order instead, which on ext4 and xfs follows the
order their directories and data were allocated in, close to the order on disk and to what
`tar` reads. Each file's bytes are appended to its shard's spill with where they belong; the
shard writer then reads the spill (just written, mostly still in the page cache) in the
shuffled order. The plan is untouched, so the shard bytes and the shuffle are the same as a
pack that reads SRC in shuffled order.

A spill is a temporary file in DEST (`.shard-NNNNNN.tar.spill.XXXX.tmp`, mode 0600, created
through `fileio.create_temp`, so never through a planted link) and is removed once its shard is
in place. A pack killed meanwhile leaves spills that the next run removes before reading again
the files of the shards not yet finished. Each record carries the crc32 of the bytes as read
from SRC, checked when the shard is written: a spill damaged on the way is an error, never a
shard. Memory: one write buffer per open spill and, while a shard is written, the index of its
own spill; nothing per file of SRC beyond the plan itself.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, BinaryIO

from diskinfo.errors import UserError
from diskinfo.fileio import create_temp, unlink_quietly
from diskinfo.pack.access import Owner
from diskinfo.pack.scan import Member, Sample
from diskinfo.pack.source import CHUNK, SourceError, read_source

RECORD = struct.Struct("<IIQ")  # sample's position in the shard, member index, size
CRC = struct.Struct("<I")  # after the bytes: their crc32 as read from SRC
BUFFER = 1 << 17  # write buffer per open spill: 64 shards, 8 MiB
OPEN_SPILLS = 256  # spills open at once; a pack with more shards reads SRC once per 256
AHEAD_THREADS = 8  # reads in flight
AHEAD_FILES = 64  # files read ahead at most
AHEAD_BYTES = 32 << 20  # bytes read ahead at most
AHEAD_LARGE = 4 << 20  # a file larger than this is read in chunks when its turn comes


class Spill:
    """One shard's spill: records appended in read order, read back by (position, member)."""

    def __init__(self, dir_fd: int, shard: str) -> None:
        self.dir_fd = dir_fd
        self.fd, self.name = create_temp(dir_fd, f".{shard}.spill.")
        self.out: BinaryIO = open(self.fd, "w+b", buffering=BUFFER, closefd=False)  # noqa: SIM115
        self.index: dict[tuple[int, int], tuple[int, int, int]] | None = None

    def append(self, position: int, member: int, size: int, chunks: Iterator[bytes]) -> None:
        self.out.write(RECORD.pack(position, member, size))
        crc = 0
        for chunk in chunks:
            self.out.write(chunk)
            crc = zlib.crc32(chunk, crc)
        self.out.write(CRC.pack(crc))

    def finish(self) -> None:
        """Done appending: build the index (offset, size, crc) of every record."""
        self.out.flush()
        index: dict[tuple[int, int], tuple[int, int, int]] = {}
        offset, end = 0, os.fstat(self.fd).st_size
        while offset < end:
            position, member, size = RECORD.unpack(os.pread(self.fd, RECORD.size, offset))
            offset += RECORD.size
            (crc,) = CRC.unpack(os.pread(self.fd, CRC.size, offset + size))
            index[(position, member)] = (offset, size, crc)
            offset += size + CRC.size
        self.index = index

    def chunks(self, position: int, member: int, shown: str) -> Iterator[bytes]:
        """The member's bytes, as read from SRC (checked against their crc32)."""
        if self.index is None:
            self.finish()  # here, not after reading SRC: one shard's index in memory at a time
        assert self.index is not None
        offset, size, crc = self.index[(position, member)]
        left, got = size, 0
        while left:
            chunk = os.pread(self.fd, min(CHUNK, left), offset)
            if not chunk:
                break
            got = zlib.crc32(chunk, got)
            offset += len(chunk)
            left -= len(chunk)
            yield chunk
        if left or got != crc:
            raise SourceError(f"{shown}: its bytes changed in the spill file; re-run the pack")

    def remove(self) -> None:
        # The name goes first and nothing here may raise: on a full disk closing the buffer
        # flushes into ENOSPC, and a raise would leave this spill and every later one behind.
        unlink_quietly(self.dir_fd, self.name)
        with contextlib.suppress(OSError):
            self.out.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


def spill_shards(
    dir_fd: int,
    shards: dict[str, list[Sample]],
    owner: Owner | None,
    advance: Callable[[int], None] = lambda nbytes: None,
) -> dict[str, Spill]:
    """Read every file of these shards' samples once, in inode order, into one spill per
    shard. On any failure every spill made here is removed."""
    spills: dict[str, Spill] = {}
    try:
        for name in shards:
            spills[name] = Spill(dir_fd, name)
        reads = sorted(
            (m.ino, m.path, name, position, k, m)
            for name, samples in shards.items()
            for position, sample in enumerate(samples)
            for k, m in enumerate(sample.members)
        )
        for _, _, name, position, k, member, chunks in _ahead(reads, owner):
            spills[name].append(position, k, member.size, chunks)
            advance(member.size)
    except BaseException as exc:
        for one in spills.values():
            one.remove()
        if isinstance(exc, SourceError):
            raise UserError(str(exc)) from None
        raise
    return spills


def _ahead(
    reads: list[tuple[int, str, str, int, int, Member]], owner: Owner | None
) -> Iterator[tuple[Any, ...]]:
    """The reads in order, each with its bytes, read by AHEAD_THREADS threads up to
    AHEAD_FILES files or AHEAD_BYTES ahead: one read at a time waits out each request's
    latency, as `tar` does; a few in flight keep the device busy. Larger files are read
    in chunks when their turn comes, so memory stays bounded."""
    pool = ThreadPoolExecutor(AHEAD_THREADS, thread_name_prefix="pack-read")
    pending: deque[tuple[tuple[Any, ...], Future[list[bytes]] | None]] = deque()
    queued = 0

    def first() -> tuple[Any, ...]:
        nonlocal queued
        read, future = pending.popleft()
        member = read[-1]
        if future is None:
            return (*read, read_source(member, owner))
        queued -= member.size
        return (*read, future.result())

    try:
        for read in reads:
            member = read[-1]
            small = member.size <= AHEAD_LARGE
            pending.append((read, pool.submit(_whole, member, owner) if small else None))
            queued += member.size if small else 0
            while len(pending) >= AHEAD_FILES or queued > AHEAD_BYTES:
                yield first()
        while pending:
            yield first()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _whole(member: Member, owner: Owner | None) -> list[bytes]:
    return list(read_source(member, owner))
