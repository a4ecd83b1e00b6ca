"""Measuring a device as `diskinfo bench` does: O_DIRECT reads at queue depth 1, like
`fio --direct=1 --ioengine=psync`, sequential 1 MiB and random 4 KiB.

The result is a `DeviceBaseline` for the store (`diskinfo.analyse.baseline`), tagged with the
identity of the device that was read.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import mmap
import os
import random
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from diskinfo.analyse.baseline import DeviceBaseline
from diskinfo.errors import UserError
from diskinfo.resolve import Resolver
from diskinfo.sources.blockid import read_identity
from diskinfo.units import MIB, format_given, format_size

SEQ_BLOCK = 1 << 20
RAND_BLOCK = 4096
# a directory the bench may not write to (a dataset mounted read-only) is measured by reading
# its largest file, found among this many entries, if it is at least this big: a smaller one
# wraps around within the disk's own cache and overstates it
FIND_MAX_ENTRIES = 100_000
EXISTING_MIN = 64 * MIB


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


def open_direct(path: str, shown: str | None = None) -> int:
    """O_DIRECT read-only descriptor: reads bypass the page cache, as fio --direct=1.
    `shown`: the path errors name, where `path` is not the user's. A FIFO or a device is never
    waited on (O_NONBLOCK, then refused): a regular file only."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT | os.O_NONBLOCK | os.O_CLOEXEC)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise UserError(f"{shown or path}: not a regular file or directory")
        return fd
    except OSError as exc:
        if exc.errno == errno.EINVAL:
            raise UserError(
                f"{shown or path}: the filesystem does not support direct I/O (some FUSE, "
                "tmpfs before Linux 6.6): there is no device bandwidth to measure here"
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


TEST_PREFIX = ".diskinfo-bench-"
KEEP_FREE = 1 << 30  # a test file leaves this free (or a tenth of a small filesystem)
STALE_S = 10.0  # a named test file untouched this long and unlocked has lost its bench


def check_room(directory: str, size: int) -> None:
    """Refuse a test file that would fill the filesystem: a bench run beside training (its
    documented use, `docker exec`) must not make the job's checkpoint writes fail."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    keep = min(KEEP_FREE, st.f_blocks * st.f_frsize // 10)
    if size > free - keep:
        raise UserError(
            f"a {format_given(size)} test file does not fit in {directory}: "
            f"{format_size(free, binary=True)} free, and {format_size(keep, binary=True)} "
            "must stay free; give a "
            "smaller --size, or pass a large file on the device instead of a directory"
        )


def remove_stale(directory: str, note: Callable[[str], None]) -> None:
    """Delete named test files that a killed bench of an earlier version left behind (a
    hidden file of gigabytes in the data folder goes unnoticed); one still open under a lock
    (such a bench still running) is kept."""
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        stale = [e.path for e in entries if e.name.startswith(TEST_PREFIX)]
    for path in stale:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or time.time() - st.st_mtime < STALE_S:
                continue  # a bench that has just made it: named until it is unlinked
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: a bench is using it
            os.unlink(path)
            note(
                f"removed {path} ({format_size(st.st_size, binary=True)}), a test file left "
                "by a bench that was killed"
            )
        except OSError:
            continue
        finally:
            os.close(fd)


@contextlib.contextmanager
def test_file(
    directory: str, size: int, note: Callable[[str], None] = lambda _: None
) -> Iterator[str]:
    """A file of incompressible data in `directory`, flushed to the device, with no name: it
    is unlinked as soon as it is made and read through /proc/self/fd, so nothing is left
    behind however the bench ends (SIGKILL and `docker stop` of an exec included); the
    kernel frees it when the descriptor closes."""
    remove_stale(directory, note)
    check_room(directory, size)
    note(f"writing a {format_given(size)} test file in {directory}")
    fd, path = tempfile.mkstemp(prefix=TEST_PREFIX, dir=directory)
    try:
        os.close(open_direct(path, shown=directory))  # no direct I/O: say so before writing
        os.unlink(path)
        block = os.urandom(SEQ_BLOCK)
        written = 0
        while written < size:
            written += os.write(fd, block[: min(SEQ_BLOCK, size - written)])
        os.fsync(fd)
        yield f"/proc/self/fd/{fd}"  # opened again with O_DIRECT, a description of its own
    finally:
        os.close(fd)


def largest_file(directory: str, max_entries: int = FIND_MAX_ENTRIES) -> tuple[str, int] | None:
    """(path, size) of the largest regular file under `directory` on its own filesystem
    (links not followed), among its first `max_entries` entries; None if there is none."""
    top_dev = os.stat(directory).st_dev
    best: tuple[int, str] | None = None
    pending, seen = [directory], 0
    while pending and seen < max_entries:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as entries:
            for entry in entries:
                seen += 1
                if seen > max_entries:
                    break  # one huge folder too: the search stays bounded
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    if st.st_dev != top_dev:
                        continue  # another mount below: another device
                    if stat.S_ISDIR(st.st_mode):
                        pending.append(entry.path)
                    elif stat.S_ISREG(st.st_mode) and (best is None or st.st_size > best[0]):
                        best = (st.st_size, entry.path)
    return (best[1], best[0]) if best is not None else None


def existing_file(directory: str, note: Callable[[str], None]) -> str:
    """The file to read where no test file may be written: the directory's largest."""
    found = largest_file(directory)
    if found is None or found[1] < EXISTING_MIN:
        biggest = f" (its largest is {format_size(found[1], binary=True)})" if found else ""
        raise UserError(
            f"{directory}: not writable, and no file of at least "
            f"{format_size(EXISTING_MIN, binary=True)} in it to read instead{biggest}; "
            "pass a large file on the same disk"
        )
    note(
        f"{directory} is not writable: reading its largest file instead of a test file, "
        f"{found[0]} ({format_size(found[1], binary=True)})"
    )
    return found[0]


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
    bytes (removed afterwards; a read-only one: its largest file is read instead), a regular
    file is read as it is (read-only, at most `size`)."""
    if not os.path.exists(path):
        raise UserError(f"no such file or directory: {path}")
    device = device_of(path)
    identity = read_identity(device)
    if identity is None:
        raise UserError(f"{path}: /sys has no device {device} to identify")
    if os.path.isdir(path):
        made: contextlib.AbstractContextManager[str] = (
            test_file(path, size, note)
            if os.access(path, os.W_OK)
            else contextlib.nullcontext(existing_file(path, note))
        )
    elif os.path.isfile(path):
        made = contextlib.nullcontext(path)
    else:
        raise UserError(f"{path}: not a regular file or directory")
    with made as target:
        seq = sequential_read(target, seconds, limit=size)
        rand = random_read(target, seconds)
        read_bytes = min(os.path.getsize(target), size)
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
