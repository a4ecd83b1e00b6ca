"""Read the regular files of a tar (ustar, pax, GNU; plain or gzipped) in one sequential pass,
straight from the header fields rather than through tarfile, whose per-member cost bounded the
shard reader (see benchmarks/results/shards.md).

A shard may come from anywhere (a dataset hub, a colleague, a folder others write), so every
field is checked before it is trusted, and a bad one ends the read with one `ShardError` line
that names the shard and the byte offset:

- time is linear in the file's size: every step consumes a header block, and every pax record
  consumes its own length (which must be positive);
- memory is bounded by what the file holds: a member may not claim more bytes than are left in
  a plain file, nor more than MAX_MEMBER, and its bytes are read in chunks, so a size field
  that lies costs no allocation beyond the bytes actually there;
- a shard cut short (inside a header or a member, or at a boundary: no end-of-archive block)
  is an error, never a silent loss of the samples after the cut.

A plain tar is read in spans of whole members (`_Reader.bulk`): a few MiB at once, the headers
of a span checked together with numpy, the members sliced out of that one read. Checking two
headers per sample one by one (`sum()` over 512 bytes) was half of what the reader spent on a
sample of a few kB; at 0 DataLoader workers that left it behind litdata, whose chunks hold an
offset table instead of headers. The span takes only the plainest members (a regular file,
no pax or GNU header before it, checksum and size written as tarfile and `diskinfo pack`
write them) and only what the member-by-member reader would take the same way; at anything
else the span stops and that reader goes on from there: every error, and every name with a
prefix or a pax path, is still that reader's.
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import io
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import IO

from diskinfo.errors import UserError

BLOCK = 512
MAX_MEMBER = 1 << 30  # a sample is read whole into memory: 1 GiB is no sample any more
MAX_META = 1 << 20  # pax and GNU long-name members hold a few names, not megabytes
GZIP_RATIO, GZIP_FLOOR = 200, 64 << 20  # a .tar.gz gunzips to 200x its size, 64 MiB at least
_SPARSE = "a GNU sparse member: not supported (its holes are not stored)"  # never dropped
_CHUNK = 1 << 20  # first bytes asked of a gzip stream at once: see _Reader.read
_BUFFER = 1 << 20
_SPAN = 4 << 20  # bytes read at once for a span of members; a bigger member goes one by one
_SPAN_MIN = 16 << 10  # the read after a span that stopped at once (a pax header per member)
_FILE_TYPES = (b"0", b"\0", b"7")  # regular, old-style regular, contiguous
_PAX_LENGTH = re.compile(rb"[1-9][0-9]{0,7} ")


class ShardError(UserError, ValueError):
    """A damaged or hostile shard: one line with the shard's name and the byte offset (in the
    tar stream, that is after gunzipping a gzipped shard). A ValueError too, as the reader
    raised before, so existing `except ValueError` handlers keep working."""


def tar_members(
    path: str | Path, keep: Callable[[str], bool] | None = None
) -> Iterator[tuple[str, bytes | None]]:
    """(name, bytes) of each regular file, in stored order; (name, None) for a file `keep`
    turns down, whose bytes are skipped unread (seeked over in a plain tar). Long names (pax
    `path`, GNU `L`) and pax `size` are honoured; headers are checksummed; gzipped tars
    (`.tar.gz`, `.tgz`, webdataset's TarWriter(compress=True)) are known by their magic bytes,
    whatever their name."""
    for span in tar_spans(path, keep):
        yield from span


def tar_spans(
    path: str | Path, keep: Callable[[str], bool] | None = None
) -> Iterator[Iterable[tuple[str, bytes | None]]]:
    """`tar_members` a span at a time: the members of one read (one member where the tar is
    read member by member), to be iterated once before the next span. A sample's reader
    loops over a span instead of resuming a generator per member; a span of a read is a zip
    of its names and bytes, whose loop makes no tuple per member."""
    with open(path, "rb", buffering=_BUFFER) as raw:
        gzipped = raw.peek(2)[:2] == b"\x1f\x8b"
        reader = _Reader(path, gzipped, os.fstat(raw.fileno()).st_size)
        reader.spans = not gzipped and _numpy() is not None
        try:
            with _maybe_gunzip(raw, gzipped) as fh:
                reader.fh = fh
                yield from reader.members(keep)
        except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise reader.error(f"damaged gzip data ({exc})") from None


def _maybe_gunzip(
    raw: io.BufferedReader, gzipped: bool
) -> contextlib.AbstractContextManager[IO[bytes]]:
    return gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else contextlib.nullcontext(raw)


class _Reader:
    """The position in the tar stream, kept by hand so that every error can say where."""

    def __init__(self, path: str | Path, gzipped: bool, size: int) -> None:
        self.path, self.gzipped, self.file_size = path, gzipped, None if gzipped else size
        self.stream_limit = max(GZIP_FLOOR, GZIP_RATIO * size)  # binds a .tar.gz only
        self.fh: IO[bytes] = io.BytesIO()
        self.offset = 0
        self.spans = False  # read spans of members at once (see `bulk`): plain files only
        self._buf: bytearray | None = None  # every span's read: one buffer for the shard
        self._span = _SPAN  # bytes the next span reads: see `bulk`

    def error(self, what: str, at: int | None = None) -> ShardError:
        where = self.offset if at is None else at
        stream = " of the gunzipped tar" if self.gzipped else ""
        return ShardError(f"{_printable(str(self.path))}: {what} at byte {where}{stream}")

    def read(self, size: int, what: str) -> bytes:
        """Exactly `size` bytes, or a ShardError saying the shard was cut in `what`. A plain
        file's size has bounded `size` already; a gzipped stream's has not, so it is asked
        for in growing chunks: what a lying size costs is at most twice what is there."""
        if self.file_size is not None or size <= _CHUNK:
            data = self.fh.read(size)
        else:
            parts, got = [], 0
            while got < size and (part := self.fh.read(min(size - got, max(got, _CHUNK)))):
                parts.append(part)
                got += len(part)
            data = b"".join(parts)
        if len(data) != size:
            at = self.offset + len(data)
            raise self.error(f"truncated in {what} ({len(data)} of {size} bytes)", at)
        self.offset += size
        return data

    def skip(self, size: int, what: str) -> None:
        """Past `size` bytes without keeping them: a seek in a plain file (whose size bounds
        it), reads of at most _CHUNK in a gzip stream."""
        if self.file_size is not None:
            if size > self.file_size - self.offset:
                raise self.error(f"truncated in {what}", self.file_size)
            self.fh.seek(size, 1)
            self.offset += size
            return
        left = size
        while left and (part := self.fh.read(min(left, _CHUNK))):
            left -= len(part)
        if left:
            raise self.error(f"truncated in {what}", self.offset + size - left)
        self.offset += size

    def members(
        self, keep: Callable[[str], bool] | None
    ) -> Iterator[Iterable[tuple[str, bytes | None]]]:
        plain = True  # the member read last had no pax or GNU header: spans may follow
        while True:
            if self.spans and plain:
                yield from self.bulk(keep)
            got, end, plain = self.member(keep)
            if got:
                yield got
            if end:
                return

    def member(
        self, keep: Callable[[str], bool] | None
    ) -> tuple[list[tuple[str, bytes | None]], bool, bool]:
        """The next member (none for a directory, link or device) and the pax or GNU headers
        before it, one header at a time; whether the archive ended there; and whether the
        member came without such headers (where each has one, spans would stop at once)."""
        long_name: str | None = None
        pax_size: int | None = None
        plain = True
        while True:
            start = self.offset
            header = self.fh.read(BLOCK)
            if len(header) < BLOCK:
                cut = "at a member boundary" if not header else "in a header"
                raise self.error(f"truncated {cut}: no end-of-archive block", start + len(header))
            self.offset += BLOCK
            if header.count(0) == BLOCK:
                return [], True, plain  # end of archive; a second zero block, padding: not read
            if not _checksum_ok(header):
                raise self.error("not a tar file or a damaged header", start)
            kind = header[156:157]
            meta = kind in (b"x", b"g", b"L", b"K")
            plain = plain and not meta
            size = pax_size if pax_size is not None and not meta else self._size(header, start)
            limit = MAX_META if meta else min(MAX_MEMBER, self.stream_limit - self.offset)
            if size > limit:
                raise self.error(f"member size {size} over the limit of {limit} bytes", start)
            if self.file_size is not None and size > (left := self.file_size - self.offset):
                raise self.error(f"truncated: a member of {size} bytes, {left} left", start)
            name = (long_name or _ustar_name(header)) if kind in _FILE_TYPES else ""
            if kind == b"S" or name[:1] == "/" or ".." in name.split("/"):  # sparse, or escaping
                raise self.error(_SPARSE if kind == b"S" else f"{name!r} leaves its folder", start)
            if keep is not None and kind in _FILE_TYPES and not keep(name):
                self.skip(size + -size % BLOCK, "a member's data")
                return [(name, None)], False, plain
            data = self.read(size, "a member's data")
            if size % BLOCK:
                self.read(BLOCK - size % BLOCK, "a member's padding")
            if kind == b"x":
                path, pax_size = self._pax(data, start + BLOCK)
                long_name = path or long_name
            elif kind == b"L":
                long_name = data.rstrip(b"\0").decode("utf-8", "surrogateescape")
            elif not meta:  # the member the pax and long-name headers before it describe
                # directories, links and devices hold no sample bytes
                return ([(name, data)] if kind in _FILE_TYPES else []), False, plain

    def bulk(
        self, keep: Callable[[str], bool] | None
    ) -> Iterator[Iterable[tuple[str, bytes | None]]]:
        """Spans of plain members from one read each, until a member that `member` must read:
        a pax or GNU header, a link or directory, an odd field, the end (or a cut), or one
        bigger than a read. Called between members, with no pax or long name pending.

        After a span that stopped at such a member, the next read is twice what the span took
        (at least _SPAN_MIN): a shard with a pax header before every member (names over 100
        bytes or not ASCII, as pack writes them) read 4 MiB a member, 20x the time of
        reading it member by member. A span that fills its read doubles it, up to _SPAN."""
        fh, size_of = self.fh, self.file_size
        assert size_of is not None
        if self._buf is None:  # one buffer for the shard: a fresh 4 MiB object per read
            # cost its pages' faults each time, a fifth of the time on samples of tens of kB
            self._buf = bytearray(min(_SPAN, size_of - self.offset))
        buf = self._buf
        view = memoryview(buf)
        while True:
            want = min(self._span, size_of - self.offset)
            fh.seek(self.offset)
            end = fh.readinto(view[:want])  # buf past `end`: an earlier read, never looked at
            last = self.offset + end >= size_of  # the read reached the end of the file
            starts: list[int] = []
            sizes: list[int] = []
            at, filled = 0, False  # filled: the next member did not fit in this read
            while at + BLOCK <= end:
                if buf[at + 156] not in (48, 0):  # b"0" or b"\0": a regular file
                    break
                try:
                    size = int(buf[at + 124 : at + 135], 8)  # strict form checked in _plain
                except ValueError:
                    break
                following = at + BLOCK + size + -size % BLOCK
                if size < 0 or following > end:
                    filled = size >= 0
                    break
                starts.append(at)
                sizes.append(size)
                at = following
            else:
                filled = True
            good, names = _plain(buf, end, starts)
            starts_all, starts, sizes = starts, starts[:good], sizes[:good]
            span: Iterable[tuple[str, bytes | None]]
            if keep is None:
                span = zip(names, _slices(view, starts, sizes), strict=True)
            else:
                span = [
                    (name, view[start + BLOCK : start + BLOCK + size].tobytes())
                    if keep(name)
                    else (name, None)
                    for name, start, size in zip(names, starts, sizes, strict=True)
                ]
            if names:
                yield span
            taken = starts_all[good] if good < len(starts_all) else at
            self.offset += taken
            if filled and good == len(starts_all):  # the read ran out before the plain members
                self._span = min(_SPAN, 2 * self._span)
                if starts and not last:
                    continue
            else:  # at a member `member` must read
                self._span = min(_SPAN, max(_SPAN_MIN, 2 * taken))
            fh.seek(self.offset)
            return

    def _size(self, header: bytes, start: int) -> int:
        field = header[124:136]
        if field[0] == 0x80:  # GNU base-256, positive: only for sizes of 8 GiB and more
            return int.from_bytes(field[1:], "big")
        size = _octal(field.split(b"\0", 1)[0].strip(b" ") or b"0")
        if size is None:  # a sign, a base-256 negative, spaces inside: int() would take some
            raise self.error(f"bad member size field {bytes(field)!r}", start)
        return size

    def _pax(self, data: bytes, at: int) -> tuple[str | None, int | None]:
        """The `path` and `size` of a pax extended header: records "%d key=value\\n", where the
        length counts the whole record. Each record must be positive, end inside the header
        with a newline and hold a key; anything else is a damaged header, not a guess."""
        pos, path, size = 0, None, None
        while pos < len(data):
            lead = _PAX_LENGTH.match(data, pos)
            if lead is None:
                raise self.error("bad pax record length", at + pos)
            length = int(lead.group()[:-1])
            end = pos + length
            if end > len(data) or end <= lead.end() or data[end - 1] != 0x0A:
                raise self.error(f"pax record of length {length} does not fit", at + pos)
            key, eq, value = data[lead.end() : end - 1].partition(b"=")
            if not eq or not key:
                raise self.error("pax record without key=value", at + pos)
            if key.startswith(b"GNU.sparse."):
                raise self.error(_SPARSE, at + pos)
            if key == b"path":
                path = value.decode("utf-8", "surrogateescape")
            elif key == b"size":
                if not value.isdigit() or len(value) > 20:
                    raise self.error(f"bad pax size {value[:24]!r}", at + pos)
                size = int(value)
            pos = end
        return path, size


def _octal(digits: bytes) -> int | None:
    """Only the digits 0-7: int(x, 8) alone takes "-1", "+7", "1_0" and "0o7" too."""
    if not digits.isdigit():
        return None
    try:
        return int(digits, 8)
    except ValueError:  # an 8 or a 9
        return None


@functools.cache
def _numpy() -> ModuleType | None:
    """numpy, where it is installed (the image has it; torch works without it)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


_OCTAL_6 = [8**k for k in range(5, -1, -1)]


def _plain(buf: bytearray, end: int, starts: list[int]) -> tuple[int, list[str]]:
    """How many of the headers at `starts` (block-aligned offsets in `buf[:end]`), from the first,
    `member` would take as they are: checksum right, size and checksum fields written as
    tarfile writes them (11 octal digits, then NUL or space; 6 digits, NUL, space), so that
    the values read without those checks are theirs. And the names of those members, as
    `member` reads them. Checked together: one numpy pass, one decode."""
    if not starts:
        return 0, []
    np = _numpy()
    assert np is not None
    blocks = np.frombuffer(buf, np.uint8, count=end // BLOCK * BLOCK).reshape(-1, BLOCK)
    heads = blocks[np.asarray(starts) // BLOCK]
    size, chk = heads[:, 124:136], heads[:, 148:156]
    digits = chk[:, :6].astype(np.int64) - 48
    ok = ((size[:, :11] >= 48) & (size[:, :11] <= 55)).all(1)
    ok &= (size[:, 11] == 0) | (size[:, 11] == 32)
    ok &= ((digits >= 0) & (digits <= 7)).all(1) & (chk[:, 6] == 0) & (chk[:, 7] == 32)
    stored = digits @ np.asarray(_OCTAL_6)
    # a byte sum of 256 bytes fits 16 bits: two of those cost half of one sum in 64 bits
    total = heads.reshape(-1, 2, BLOCK // 2).sum(2, dtype=np.uint16).sum(1, dtype=np.int64)
    ok &= total - chk.sum(1, dtype=np.int64) + 256 == stored
    dots = (heads[:, :499] == 46) & (heads[:, 1:500] == 46)  # '..', '/': for `member` to refuse
    ok &= ~dots[:, :99].any(1) & ~dots[:, 345:].any(1) & (heads[:, 0] != 47) & (heads[:, 345] != 47)
    bad = np.flatnonzero(~ok)
    good = int(bad[0]) if bad.size else len(starts)
    if not good:
        return 0, []
    heads = heads[:good]
    # numpy drops a bytes field's trailing NULs; one decode for all: UTF-8 decodes the same
    # apart, and the names hold no NUL to split on but where one ends before its field does
    names = np.ascontiguousarray(heads[:, :100]).view("S100").ravel().tolist()
    joined = b"\0".join(names)
    if joined.count(0) != len(names) - 1:  # bytes after a name's NUL: the name ends there
        joined = b"\0".join(name.split(b"\0", 1)[0] for name in names)
    decoded = joined.decode("utf-8", "surrogateescape").split("\0")
    ustar = (heads[:, 257:262] == np.frombuffer(b"ustar", np.uint8)).all(1)
    for i in np.flatnonzero(ustar & (heads[:, 345] != 0)).tolist():  # prefix/name
        decoded[i] = _ustar_name(heads[i].tobytes())
    return good, decoded


def _slices(view: memoryview, starts: list[int], sizes: list[int]) -> list[bytes]:
    return [
        view[at + BLOCK : at + BLOCK + n].tobytes() for at, n in zip(starts, sizes, strict=True)
    ]


def _checksum_ok(header: bytes) -> bool:
    stored = _octal(header[148:156].split(b"\0", 1)[0].strip(b" "))
    return stored == sum(header) - sum(header[148:156]) + 256


def _ustar_name(header: bytes) -> str:
    name = header[:100].split(b"\0", 1)[0]
    if header[257:262] == b"ustar" and (prefix := header[345:500].split(b"\0", 1)[0]):
        name = prefix + b"/" + name
    return name.decode("utf-8", "surrogateescape")


def _printable(text: str) -> str:
    """A path as one line: control characters escaped, so the error stays one line."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
