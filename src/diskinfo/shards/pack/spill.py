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
from SRC (and of what it says of them), checked when the shard is written: a spill damaged on
the way is an error, never a shard. Memory: one write buffer per open spill, the files to read
sorted by inode on disk (`runs`) and, while a shard is written, the index of its own spill
(16 bytes per file and 4 per sample of that shard); nothing per file of SRC.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from diskinfo.errors import UserError
from diskinfo.fileio import create_temp, unlink_quietly
from diskinfo.shards.pack.access import Owner
from diskinfo.shards.pack.extsort import merged
from diskinfo.shards.pack.plan import Layout
from diskinfo.shards.pack.scan import Member, Sample, SampleList
from diskinfo.shards.pack.source import CHUNK, SourceError, open_source, read_opened

# a record: RECORD, the file's bytes, its sample's key and its extension (UTF-8), then CRC
# position, member index, members in the sample, size, mtime, label, key and ext lengths
RECORD = struct.Struct("<IIIQqiII")
CRC = struct.Struct("<I")  # crc32 of all the record before it, the bytes as read from SRC
NO_LABEL = -1
BUFFER = 1 << 17  # write buffer per open spill: 64 shards, 8 MiB
OPEN_SPILLS = 256  # spills open at once; a pack with more shards reads SRC once per 256
AHEAD_FILES = 16  # files opened and announced to the kernel ahead of the one read
AHEAD_BYTES = 32 << 20  # bytes announced ahead at most
AHEAD_LARGE = 4 << 20  # of a larger file only this much is announced ahead
_EMPTY = (1 << 64) - 1  # an index slot no record filled
CHANGED = "its bytes changed in the spill file; re-run the pack"


def _name(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")  # file names need not be UTF-8


class Spill:
    """One shard's spill: records appended in read order, read back by (position, member).
    A record holds what the shard needs of its file (key, extension, size, mtime, label),
    so writing the shard needs nothing else in memory."""

    def __init__(self, dir_fd: int, shard: str, samples: int) -> None:
        self.dir_fd, self.samples_count = dir_fd, samples
        self.fd, self.name = create_temp(dir_fd, f".{shard}.spill.")
        self.out: BinaryIO = open(self.fd, "w+b", buffering=BUFFER, closefd=False)  # noqa: SIM115
        # after `finish`: the records of sample p are slots[starts[p]:starts[p + 1]], offsets
        # in member order, and their lengths (16 bytes per file, 4 per sample of this shard)
        self.starts: array[int] | None = None
        self.slots, self.lengths = array("Q"), array("Q")
        self.ready: dict[int, bytes] = {}  # member -> bytes, of the sample `samples` is at

    def append(
        self,
        position: int,
        member: int,
        entry: tuple[int, int, int, int | None, str, str],
        chunks: Iterator[bytes],
    ) -> None:
        """entry: (members in the sample, size, mtime, label, key, ext)."""
        members, size, mtime, label, key, ext = entry
        key_b, ext_b = _name(key), _name(ext)
        head = RECORD.pack(
            position, member, members, size, mtime, NO_LABEL if label is None else label,
            len(key_b), len(ext_b),
        )  # fmt: skip
        tail = key_b + ext_b
        if size <= CHUNK:  # the common case, in one write: four cost more than the copy
            data = b"".join(chunks)
            crc = zlib.crc32(tail, zlib.crc32(data, zlib.crc32(head)))
            self.out.write(b"".join((head, data, tail, CRC.pack(crc))))
            return
        self.out.write(head)
        crc = zlib.crc32(head)
        for chunk in chunks:
            self.out.write(chunk)
            crc = zlib.crc32(chunk, crc)
        self.out.write(tail)
        self.out.write(CRC.pack(zlib.crc32(tail, crc)))

    def finish(self) -> None:
        """Done appending: index every record by (position, member)."""
        self.out.flush()
        positions, members, offsets = array("I"), array("I"), array("Q")
        offset, end = 0, os.fstat(self.fd).st_size
        while offset < end:
            head = os.pread(self.fd, RECORD.size, offset)
            if len(head) < RECORD.size:
                raise SourceError(f"{self.name}: a record cut short in the spill file")
            position, member, _, size, _, _, key_len, ext_len = RECORD.unpack(head)
            positions.append(position)
            members.append(member)
            offsets.append(offset)
            offset += RECORD.size + size + key_len + ext_len + CRC.size
        offsets.append(offset)  # where the last record ends
        n = self.samples_count
        starts = array("I", bytes(4 * (n + 1)))
        for position in positions:
            if position >= n:
                raise SourceError(f"{self.name}: a damaged record in the spill file")
            starts[position + 1] += 1
        for p in range(n):
            starts[p + 1] += starts[p]
        slots = array("Q", [_EMPTY]) * len(positions)
        lengths = array("Q", bytes(8 * len(positions)))
        for i, (position, member) in enumerate(zip(positions, members, strict=True)):
            slot = starts[position] + member
            if slot >= starts[position + 1] or slots[slot] != _EMPTY:
                raise SourceError(f"{self.name}: a damaged record in the spill file")
            slots[slot], lengths[slot] = offsets[i], offsets[i + 1] - offsets[i]
        self.starts, self.slots, self.lengths = starts, slots, lengths

    def samples(self) -> Iterator[Sample]:
        """The shard's samples in their packed order, as the records name them (a member's
        `path` is its name in the shard, for messages: its bytes come from `chunks`). A record
        of up to CHUNK bytes is read whole, in one call, and checked here; its bytes wait in
        `ready` for `chunks`."""
        if self.starts is None:
            self.finish()  # here, not after reading SRC: one shard's index in memory at a time
        assert self.starts is not None
        for position in range(self.samples_count):
            first, end = self.starts[position], self.starts[position + 1]
            if first == end:
                raise SourceError(f"{self.name}: sample {position} missing from the spill")
            sample: Sample | None = None
            self.ready.clear()
            for k in range(end - first):
                offset, length = self.slots[first + k], self.lengths[first + k]
                whole = length <= CHUNK
                record = os.pread(self.fd, length if whole else RECORD.size, offset)
                if len(record) != (length if whole else RECORD.size):
                    raise SourceError(f"{self.name}: a record cut short in the spill file")
                _, _, members, size, mtime, label, key_len, ext_len = RECORD.unpack_from(record)
                if whole:
                    names = record[RECORD.size + size : -CRC.size]
                else:
                    names = os.pread(self.fd, key_len + ext_len, offset + RECORD.size + size)
                key = names[:key_len].decode("utf-8", "surrogateescape")
                ext = names[key_len:].decode("utf-8", "surrogateescape")
                if whole:
                    if CRC.unpack(record[-CRC.size :])[0] != zlib.crc32(record[: -CRC.size]):
                        raise SourceError(f"{key}.{ext}: {CHANGED}")
                    self.ready[k] = record[RECORD.size : RECORD.size + size]
                if members != end - first:
                    raise SourceError(f"{self.name}: sample {position} incomplete in the spill")
                if sample is None:
                    sample = Sample(key, label=None if label == NO_LABEL else label)
                sample.members.append(Member(ext, f"{key}.{ext}", size, mtime))
            assert sample is not None
            yield sample

    def chunks(self, position: int, member: int, shown: str) -> Iterator[bytes]:
        """The member's bytes, as read from SRC (its record checked against its crc32): those
        `samples` read with the record, else read here in chunks of CHUNK."""
        if (data := self.ready.pop(member, None)) is not None:
            yield data
            return
        if self.starts is None:
            self.finish()
        assert self.starts is not None
        offset = self.slots[self.starts[position] + member]
        head = os.pread(self.fd, RECORD.size, offset)
        fields = RECORD.unpack(head)
        size, key_len, ext_len = fields[3], fields[6], fields[7]
        got = zlib.crc32(head)
        offset += RECORD.size
        left = size
        while left:
            chunk = os.pread(self.fd, min(CHUNK, left), offset)
            if not chunk:
                break
            got = zlib.crc32(chunk, got)
            offset += len(chunk)
            left -= len(chunk)
            yield chunk
        tail = os.pread(self.fd, key_len + ext_len + CRC.size, offset)
        crc = CRC.unpack(tail[-CRC.size :])[0] if len(tail) >= CRC.size else None
        if left or crc != zlib.crc32(tail[: -CRC.size], got):
            raise SourceError(f"{shown}: {CHANGED}")

    def remove(self) -> None:
        # The name goes first and nothing here may raise: on a full disk closing the buffer
        # flushes into ENOSPC, and a raise would leave this spill and every later one behind.
        unlink_quietly(self.dir_fd, self.name)
        with contextlib.suppress(OSError):
            self.out.close()
        with contextlib.suppress(OSError):
            os.close(self.fd)


Read = tuple[int, str, int, int, int, int, int, int, int | None, str, str]
# inode, path, shard, position, member index, members, size, mtime, label, key, ext


def spill_shards(
    dir_fd: int,
    shards: dict[str, int],
    samples: SampleList,
    layout: Layout,
    owner: Owner | None,
    where: Path,
    advance: Callable[[int], None] = lambda nbytes: None,
) -> dict[str, Spill]:
    """Read every file of these shards (name -> index in `layout`) once, in inode order,
    into one spill per shard; the files are sorted by inode on disk (`runs`, in `where`).
    On any failure every spill made here is removed."""
    spills: dict[str, Spill] = {}
    by_index: dict[int, Spill] = {}
    try:
        for name, index in shards.items():
            a, b = layout.bounds[index]
            spills[name] = by_index[index] = Spill(dir_fd, name, b - a)

        def reads() -> Iterator[Read]:
            for i, (key, label, members) in enumerate(samples.raw()):
                shard, position = layout.shard_of(i)
                if shard in by_index:
                    for k, (ext, path, size, mtime, ino) in enumerate(members):
                        count = len(members)
                        yield ino, path, shard, position, k, count, size, mtime, label, key, ext

        for read, chunks in _ahead(merged(reads(), where), owner):
            shard, position, k = read[2:5]
            by_index[shard].append(position, k, read[5:], chunks)
            advance(read[6])
    except BaseException as exc:
        for one in spills.values():
            one.remove()
        if isinstance(exc, SourceError):
            raise UserError(str(exc)) from None
        raise
    return spills


def _member(read: Read) -> Member:
    return Member(read[10], read[1], read[6], read[7], read[0])


def _ahead(reads: Iterator[Read], owner: Owner | None) -> Iterator[tuple[Read, Iterator[bytes]]]:
    """The reads in order, each with its bytes (to be taken before the next). One thread
    keeps several requests in flight: each file is opened AHEAD_FILES files (at most
    AHEAD_BYTES) before its turn and announced with POSIX_FADV_WILLNEED, so the kernel reads
    it in while the files before it are copied, instead of waiting out each read's latency
    one at a time as `tar` does. Of a larger file only its first AHEAD_LARGE bytes are
    announced. The bytes wait in the page cache, not in this process. Threads doing blocking
    reads were measured first and cost more than they hid on 2 cores: 200,000 files of
    1-8 kB read cold in 27-35 s with 8 threads (30-34 s of system time, handing the GIL and
    the wake-ups back and forth) against 10-15 s this way and 21-23 s one file at a time."""
    pending: deque[tuple[Read, int]] = deque()
    queued = 0
    try:
        for read in reads:
            fd = open_source(read[1], owner)
            pending.append((read, fd))
            queued += min(read[6], AHEAD_LARGE)
            with contextlib.suppress(OSError):  # a hint: a file that takes none is read as is
                os.posix_fadvise(fd, 0, min(read[6], AHEAD_LARGE), os.POSIX_FADV_WILLNEED)
            while len(pending) >= AHEAD_FILES or queued > AHEAD_BYTES:
                queued -= min(pending[0][0][6], AHEAD_LARGE)
                yield from _first(pending)
        while pending:
            yield from _first(pending)
    finally:
        for _, fd in pending:
            os.close(fd)


def _first(pending: deque[tuple[Read, int]]) -> Iterator[tuple[Read, Iterator[bytes]]]:
    """The first pending read with its bytes; its file is closed once the caller comes back."""
    read, fd = pending[0]
    try:
        yield read, read_opened(fd, _member(read))
    finally:
        pending.popleft()
        os.close(fd)
