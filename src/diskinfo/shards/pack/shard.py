"""Write one shard safely: tar it under a hidden name while hashing what is written, fsync,
drop it from the page cache, read it back from the device and compare, then rename it into
place. What is written is what was read from SRC: straight, or through a spill whose crc32 of
each file is checked (`spill`). Shard bytes are deterministic (fixed owner, mode, order) and
laid out as tarfile's PAX format writes them; `verify` checks a shard entry by entry.

DEST may be another user's folder while root packs: the shard is created there with
O_EXCL|O_NOFOLLOW (`fileio.create_temp`), given its owner, read back and renamed through
descriptors only, so a link planted under the temporary name is never followed."""

from __future__ import annotations

import hashlib
import os
import struct
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from diskinfo.errors import UserError
from diskinfo.fileio import create_temp, fsync_dir, opened_dir, owner_of, unlink_quietly
from diskinfo.shards.format import CLASS, label_bytes, member_name
from diskinfo.shards.pack.access import Owner
from diskinfo.shards.pack.scan import BLOCK, Member, Sample
from diskinfo.shards.pack.source import CHUNK, SourceError, read_source
from diskinfo.shards.pack.spill import Spill

ZEROS = bytes(tarfile.RECORDSIZE)
# a ustar header of a regular file, owner 0:0, mode 0644, as tarfile's PAX format writes one
# when no pax record is needed; name, size, mtime and the checksum are filled in per entry
_HEAD = struct.Struct("100s8s8s8s12s12s8s1s100s8s32s32s8s8s155s12x")


def entry_header(name: str, size: int, mtime: int) -> bytes:
    """The tar header(s) of one entry. Built here for the common case (an ASCII name of 100
    bytes or less, sizes and times that fit the octal fields): tarfile's own header code costs
    more than reading the file. Anything else goes through tarfile's PAX writer."""
    if len(name) <= 100 and name.isascii() and 0 <= size < 8**11 and 0 <= mtime < 8**11:
        fields = [
            name.encode(), b"0000644\0", b"0000000\0", b"0000000\0",
            b"%011o\0" % size, b"%011o\0" % mtime, b"        ", tarfile.REGTYPE, b"",
            tarfile.POSIX_MAGIC, b"", b"", b"", b"", b"",
        ]  # fmt: skip
        block = _HEAD.pack(*fields)
        return block[:148] + b"%06o\0" % sum(block) + block[155:]
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, mtime, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


def _entries(sample: Sample, label_member: bool) -> Iterator[tuple[int, str, Member | None]]:
    for k, m in enumerate(sample.members):
        yield k, member_name(sample.key, m.ext), m
    if sample.label is not None and label_member:
        yield -1, member_name(sample.key, CLASS), None


def verify(path: Path, expected: list[tuple[str, int, str]]) -> str:
    """Read a shard and compare every entry's name, size and sha256 with those expected;
    returns the shard's own sha256."""
    with open(path, "rb") as handle:
        return verify_handle(handle, path.name, expected)


def verify_handle(handle: BinaryIO, shown: str, expected: list[tuple[str, int, str]]) -> str:
    """`verify` on an open shard, read from its start (the descriptor it was written through:
    no name in DEST is opened again)."""
    whole = hashlib.sha256()

    class Hashing:
        def __init__(self, handle: BinaryIO) -> None:
            self.handle = handle

        def read(self, n: int = -1) -> bytes:
            data = self.handle.read(n)
            whole.update(data)
            return data

    stream = Hashing(handle)
    seen = 0
    with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
        for info in tar:
            if seen >= len(expected):
                raise UserError(f"{shown}: verification failed: unexpected {info.name}")
            name, size, sha = expected[seen]
            fh = tar.extractfile(info)
            digest = hashlib.sha256()
            while fh is not None and (chunk := fh.read(CHUNK)):
                digest.update(chunk)
            if (info.name, info.size, digest.hexdigest()) != (name, size, sha):
                raise UserError(f"{shown}: verification failed at {name}: bytes differ")
            seen += 1
    while stream.read(CHUNK):
        pass
    if seen != len(expected):
        raise UserError(f"{shown}: verification failed: {seen} of {len(expected)} entries")
    return whole.hexdigest()


def write_shard(
    dest: Path,
    name: str,
    samples: Iterable[Sample] | None,
    owner: Owner | None = None,
    spilled: Spill | None = None,
    label_member: bool = True,
) -> dict[str, Any]:
    """Write, fsync, read back from the device, rename. On any failure the temporary file is
    removed. `owner`: the rule a pack running as root reads by (`access`). The
    samples and their bytes come from `spilled` (`spill`: SRC read in disk order) or,
    without it, the bytes of `samples` from SRC itself in the shard's order. `label_member`:
    a labelled sample gets its `cls` member (`--labels member`); without it the class is
    only the key's folder (`--labels key`)."""
    if spilled is not None:
        samples = spilled.samples()
    assert samples is not None
    seen = _Seen(samples)
    with opened_dir(dest) as dir_fd:
        fd, tmp = create_temp(dir_fd, f".{name}.")
        try:
            with open(fd, "w+b", buffering=CHUNK) as raw:
                if (ids := owner_of(dir_fd)) is not None:
                    os.fchown(fd, *ids)
                os.fchmod(fd, 0o644)
                written = _write_tar(raw, seen, owner, spilled, label_member)
                raw.flush()
                os.fsync(fd)
                # clean pages after fsync: dropping them makes the check below read the device
                if hasattr(os, "posix_fadvise"):
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                raw.seek(0)
                back = hashlib.sha256()
                while chunk := raw.read(CHUNK):
                    back.update(chunk)
                nbytes = os.fstat(fd).st_size
                if back.hexdigest() != written.hexdigest():
                    raise UserError(f"{name}: verification failed: read back other bytes")
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            fsync_dir(dir_fd)
        except SourceError as exc:
            unlink_quietly(dir_fd, tmp)
            raise UserError(str(exc)) from None
        except BaseException:
            unlink_quietly(dir_fd, tmp)
            raise
    return {
        "name": name,
        "samples": seen.count,
        "bytes": nbytes,
        "sha256": back.hexdigest(),
        "first_key": seen.first,
        "last_key": seen.last,
    }


class _Seen:
    """The samples, counted on their way into the tar: the state file's record of a shard
    needs its count and first and last keys, and the samples are a stream."""

    def __init__(self, samples: Iterable[Sample]) -> None:
        self.samples = samples
        self.count, self.first, self.last = 0, "", ""

    def __iter__(self) -> Iterator[Sample]:
        for sample in self.samples:
            if not self.count:
                self.first = sample.key
            self.count += 1
            self.last = sample.key
            yield sample


def _write_tar(
    raw: BinaryIO,
    samples: Iterable[Sample],
    owner: Owner | None,
    spilled: Spill | None,
    label_member: bool,
) -> Any:
    """The tar, as tarfile's PAX format lays it out; returns the sha256 of what was written.
    Pieces are gathered up to CHUNK and written and hashed together: a sample of a few kB is
    four or five pieces (headers, bytes, padding), and a write and a hash update for each
    cost more than the copy that joins them."""
    digest = hashlib.sha256()
    nbytes = 0
    pending: list[bytes] = []
    held = 0

    def put(data: bytes) -> None:
        nonlocal held
        pending.append(data)
        held += len(data)
        if held >= CHUNK:
            flush()

    def flush() -> None:
        nonlocal held, nbytes
        block = b"".join(pending)
        raw.write(block)
        digest.update(block)
        nbytes += len(block)
        pending.clear()
        held = 0

    for position, sample in enumerate(samples):
        for k, entry, member in _entries(sample, label_member):
            if member is None:
                data = label_bytes(sample.label or 0)
                put(entry_header(entry, len(data), max(m.mtime for m in sample.members)))
                put(data)
                size = len(data)
            else:
                put(entry_header(entry, member.size, member.mtime))
                if spilled is not None:
                    chunks = spilled.chunks(position, k, member.path)
                else:
                    chunks = read_source(member, owner)
                for chunk in chunks:
                    put(chunk)
                size = member.size
            if size % BLOCK:
                put(ZEROS[: BLOCK - size % BLOCK])
    flush()
    end = nbytes + 2 * BLOCK
    put(ZEROS[: 2 * BLOCK + -end % tarfile.RECORDSIZE])
    flush()
    return digest
