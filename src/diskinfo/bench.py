"""Measuring a device as `diskinfo bench` does: O_DIRECT reads at queue depth 1, like
`fio --direct=1 --ioengine=psync`, sequential 1 MiB and random 4 KiB.

The result is a `DeviceBaseline` for the store (`diskinfo.analyse.baseline`), tagged with the
identity of the device that was read.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from diskinfo.analyse.baseline import DeviceBaseline
from diskinfo.errors import UserError
from diskinfo.resolve import Resolver
from diskinfo.sources.blockid import read_identity
from diskinfo.units import MIB

SEQ_BLOCK = 1 << 20
RAND_BLOCK = 4096


@dataclass
class ReadResult:
    ios: int
    nbytes: int
    seconds: float

    @property
    def mb_s(self) -> float:
        return self.nbytes / MIB / self.seconds if self.seconds > 0 else 0.0

    @property
    def iops(self) -> float:
        return self.ios / self.seconds if self.seconds > 0 else 0.0


def open_direct(path: str) -> int:
    """O_DIRECT read-only descriptor: reads bypass the page cache, as fio --direct=1."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            raise UserError(
                f"{path}: the filesystem does not support direct I/O (some FUSE, tmpfs before "
                "Linux 6.6): "
                "there is no device bandwidth to measure here"
            ) from None
        raise


def _aligned(size: int) -> mmap.mmap:
    return mmap.mmap(-1, size)  # anonymous mappings are page aligned, as O_DIRECT needs


def sequential_read(path: str, seconds: float, limit: int | None = None) -> ReadResult:
    """1 MiB direct reads front to back (wrapping at the end) for `seconds`, queue depth 1."""
    fd = open_direct(path)
    buf = _aligned(SEQ_BLOCK)
    try:
        size = os.fstat(fd).st_size
        span = min(size, limit) if limit else size
        span -= span % SEQ_BLOCK
        if span < SEQ_BLOCK:
            raise UserError(f"{path}: file too small for a sequential test (< 1 MiB)")
        ios = nbytes = 0
        offset = 0
        start = time.perf_counter()
        end = start + seconds
        now = start
        while now < end:
            n = os.preadv(fd, [buf], offset)
            ios += 1
            nbytes += n
            offset += SEQ_BLOCK
            if offset >= span:
                offset = 0
            now = time.perf_counter()
        return ReadResult(ios, nbytes, now - start)
    finally:
        buf.close()
        os.close(fd)


def random_read(path: str, seconds: float, seed: int = 0) -> ReadResult:
    """4 KiB direct reads at uniformly random aligned offsets for `seconds`, queue depth 1."""
    fd = open_direct(path)
    buf = _aligned(RAND_BLOCK)
    try:
        blocks = os.fstat(fd).st_size // RAND_BLOCK
        if blocks < 2:
            raise UserError(f"{path}: file too small for a random-read test")
        pick = random.Random(seed).randrange
        preadv = os.preadv
        clock = time.perf_counter
        ios = 0
        start = clock()
        end = start + seconds
        now = start
        while now < end:
            preadv(fd, [buf], pick(blocks) * RAND_BLOCK)
            ios += 1
            if ios & 7 == 0:  # the clock costs as much as a fast read: look every 8
                now = clock()
        now = clock()
        return ReadResult(ios, ios * RAND_BLOCK, now - start)
    finally:
        buf.close()
        os.close(fd)


def write_test_file(directory: str, size: int) -> str:
    """A file of incompressible data in `directory`, flushed to the device."""
    fd, path = tempfile.mkstemp(prefix=".diskinfo-bench-", dir=directory)
    try:
        block = os.urandom(SEQ_BLOCK)
        written = 0
        while written < size:
            written += os.write(fd, block[: min(SEQ_BLOCK, size - written)])
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)
    return path


def device_of(path: str) -> str:
    """The kernel name of the device the verdicts judge for `path` (its top device)."""
    res = Resolver.live().resolve(path)
    if not res.watch_devices:
        raise UserError(f"{path}: {res.note or 'no block device behind this path to measure'}")
    return res.watch_devices[0]


@dataclass
class Measurement:
    baseline: DeviceBaseline
    sequential: ReadResult
    random: ReadResult


def measure(
    path: str, size: int, seconds: float, note: Callable[[str], None] = lambda _: None
) -> Measurement:
    """Sequential then random reads of `path`: a directory gets a temporary test file of `size`
    bytes (removed afterwards), a regular file is read as it is (read-only, at most `size`)."""
    if not os.path.exists(path):
        raise UserError(f"{path}: no such file or directory")
    device = device_of(path)
    identity = read_identity(device)
    if identity is None:
        raise UserError(f"{path}: /sys has no device {device} to identify")
    made = None
    if os.path.isdir(path):
        if not os.access(path, os.W_OK):
            raise UserError(f"{path}: not writable; pass a large file on the device instead")
        note(f"writing a {size / MIB:.0f} MiB test file in {path}")
        made = target = write_test_file(path, size)
    elif os.path.isfile(path):
        target = path
    else:
        raise UserError(f"{path}: not a regular file or directory")
    try:
        seq = sequential_read(target, seconds, limit=size)
        rand = random_read(target, seconds)
        read_bytes = min(os.path.getsize(target), size)
    finally:
        if made is not None:
            with contextlib.suppress(OSError):
                os.unlink(made)
    result = DeviceBaseline(
        device=device,
        seq_read_mb_s=round(seq.mb_s, 2),
        rand_read_iops=round(rand.iops, 1),
        rand_read_lat_ms=round(1000.0 / rand.iops, 4) if rand.iops else 0.0,
        path=os.path.abspath(path),
        size_mb=round(read_bytes / MIB, 1),
        measured_at=time.time(),
        identity=identity,
    )
    return Measurement(result, seq, rand)
