"""Records kept on disk instead of in memory, and sorted there: the pack's plan (every file of
SRC, its sample, its shard, its place) grows with SRC, and held as Python objects it cost
about 0.76 kB per file (0.8 GB at a million files). Here it lives in unnamed temporary files
(`tempfile.TemporaryFile`: O_TMPFILE, so nothing is left behind by a `kill -9`, nor is any
name there to plant a link on) and memory holds one sorting piece and one block per piece.

Records are tuples of str, int and None, written as marshal blocks with a length in front.
"""

from __future__ import annotations

import heapq
import marshal
import struct
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

PIECE = 16_384  # records sorted in memory at a time: a few MiB
BLOCK = 256  # records per block: what a merge holds in memory per piece
FANIN = 64  # pieces of one size merged into one
_LENGTH = struct.Struct("<I")


class Records:
    """A sequence of records, appended once, then read any number of times (one reader at a
    time: each pass rewinds the same file). Unbuffered: a block is one write and two reads,
    and a piece waiting to be merged holds no buffer."""

    def __init__(self, where: Path | None) -> None:
        self.file: IO[bytes] = tempfile.TemporaryFile(dir=where, buffering=0)  # noqa: SIM115
        self.block: list[Any] = []
        self.count = 0

    def add(self, record: Any) -> None:
        self.block.append(record)
        self.count += 1
        if len(self.block) >= BLOCK:
            self._flush()

    def _flush(self) -> None:
        if self.block:
            data = marshal.dumps(self.block)
            self.file.write(_LENGTH.pack(len(data)) + data)
            self.block = []

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[Any]:
        self._flush()
        self.file.seek(0)
        while head := self.file.read(_LENGTH.size):
            (size,) = _LENGTH.unpack(head)
            yield from marshal.loads(self.file.read(size))

    def close(self) -> None:
        self.file.close()


def merged(records: Iterable[Any], where: Path | None) -> Iterator[Any]:
    """`records` in sorted order: sorted pieces of PIECE records written to `where` (unnamed
    files), FANIN pieces of one size merged into one as they come (so the open files grow with
    the log of the records, not with the records), then all merged. Memory: one piece while
    sorting, then one block per piece being merged."""
    levels: list[list[Records]] = []  # pieces by how many merges made them

    def push(piece: Records, level: int = 0) -> None:
        while True:
            if len(levels) <= level:
                levels.append([])
            levels[level].append(piece)
            if len(levels[level]) < FANIN:
                return
            group, levels[level] = levels[level], []
            try:
                piece = _write(heapq.merge(*group), where)
            finally:
                for one in group:
                    one.close()
            level += 1

    try:
        batch: list[Any] = []
        for record in records:
            batch.append(record)
            if len(batch) >= PIECE:
                batch.sort()
                push(_write(batch, where))
                batch = []
        if not levels:
            batch.sort()
            yield from batch
            return
        if batch:
            batch.sort()
            push(_write(batch, where))
        del batch
        yield from heapq.merge(*(piece for level in levels for piece in level))
    finally:
        for level in levels:
            for piece in level:
                piece.close()


def _write(records: Iterable[Any], where: Path | None) -> Records:
    piece = Records(where)
    try:
        for record in records:
            piece.add(record)
        piece._flush()
    except BaseException:
        piece.close()
        raise
    return piece
