"""Write one shard safely: tar it under a hidden name while hashing what is read from SRC,
fsync, drop it from the page cache, read it back from the device and compare member by
member, then rename it into place. Shard bytes are deterministic (fixed owner, mode, order).

DEST may be another user's folder while root packs: the shard is created there with
O_EXCL|O_NOFOLLOW (`fileio.create_temp`), given its owner, read back and renamed through
descriptors only, so a link planted under the temporary name is never followed."""

from __future__ import annotations

import hashlib
import os
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from diskinfo.errors import UserError
from diskinfo.fileio import create_temp, fsync_dir, opened_dir, owner_of, unlink_quietly
from diskinfo.pack.access import Owner, check_open
from diskinfo.pack.scan import Member, Sample, label_bytes

CHUNK = 1 << 20


def shard_name(index: int) -> str:
    return f"shard-{index:06d}.tar"


class SourceError(Exception):
    """A source file failed while being copied (kept apart from DEST's write errors)."""


class _HashingReader:
    """Reads a source file for tarfile, hashing what it hands over; fails loudly on a change."""

    def __init__(self, handle: BinaryIO, path: str, size: int) -> None:
        self.handle, self.path, self.left = handle, path, size
        self.sha = hashlib.sha256()

    def read(self, n: int = -1) -> bytes:
        try:
            data = self.handle.read(self.left if n < 0 else min(n, self.left))
        except OSError as exc:
            raise SourceError(f"cannot read {self.path}: {exc.strerror}") from None
        if not data and self.left:
            raise SourceError(f"{self.path} shrank while being packed; re-run to pack it again")
        self.left -= len(data)
        self.sha.update(data)
        return data


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, n: int = -1) -> bytes:
        out, self.data = (self.data, b"") if n < 0 else (self.data[:n], self.data[n:])
        return out


def _entries(sample: Sample) -> Iterator[tuple[str, Member | None]]:
    for m in sample.members:
        yield f"{sample.key}.{m.ext}", m
    if sample.label is not None:
        yield f"{sample.key}.cls", None


def _tarinfo(name: str, size: int, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, mtime, 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _open_source(path: str, owner: Owner | None) -> BinaryIO:
    """SRC's file for reading, links followed (on purpose) but never to what `owner` could
    not read; O_NONBLOCK so that a FIFO swapped in after the scan cannot hang the pack."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {exc.strerror}") from None
    try:
        if (why := check_open(fd, path, owner)) is not None:
            raise SourceError(why)
        return open(fd, "rb", buffering=0)  # the caller closes it
    except BaseException:
        os.close(fd)
        raise


def _add(
    tar: tarfile.TarFile, name: str, member: Member | None, sample: Sample, owner: Owner | None
) -> str:
    """Append one entry and return the sha256 of its bytes as read from SRC."""
    if member is None:
        data = label_bytes(sample.label or 0)
        mtime = max(m.mtime for m in sample.members)
        tar.addfile(_tarinfo(name, len(data), mtime), _BytesReader(data))  # type: ignore[arg-type]
        return hashlib.sha256(data).hexdigest()
    with _open_source(member.path, owner) as handle:
        if os.fstat(handle.fileno()).st_size != member.size:
            raise SourceError(f"{member.path} changed while being packed; re-run to pack it again")
        reader = _HashingReader(handle, member.path, member.size)
        tar.addfile(_tarinfo(name, member.size, member.mtime), reader)  # type: ignore[arg-type]
        return reader.sha.hexdigest()


def verify(path: Path, expected: list[tuple[str, int, str]]) -> str:
    """Read a written shard back from the device and compare every entry's name, size and
    sha256 with what was read from SRC; returns the shard's own sha256."""
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
    dest: Path, name: str, samples: list[Sample], owner: Owner | None = None
) -> dict[str, Any]:
    """Write, fsync, verify, rename. On any failure the temporary file is removed. `owner`:
    SRC's owner, whose read access bounds a root pack (`access`)."""
    expected: list[tuple[str, int, str]] = []
    with opened_dir(dest) as dir_fd:
        fd, tmp = create_temp(dir_fd, f".{name}.")
        try:
            with open(fd, "w+b", buffering=CHUNK) as raw:
                if (ids := owner_of(dir_fd)) is not None:
                    os.fchown(fd, *ids)
                os.fchmod(fd, 0o644)
                with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
                    for sample in samples:
                        for entry, member in _entries(sample):
                            sha = _add(tar, entry, member, sample, owner)
                            size = member.size if member else len(label_bytes(sample.label or 0))
                            expected.append((entry, size, sha))
                raw.flush()
                os.fsync(fd)
                # clean pages after fsync: dropping them makes the check below read the device
                if hasattr(os, "posix_fadvise"):
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                raw.seek(0)
                sha256 = verify_handle(raw, name, expected)
                nbytes = os.fstat(fd).st_size
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
        "samples": len(samples),
        "bytes": nbytes,
        "sha256": sha256,
        "first_key": samples[0].key,
        "last_key": samples[-1].key,
    }
