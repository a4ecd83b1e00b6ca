"""Hostile and damaged shards end in one ShardError line naming the shard and the byte offset,
within bounded time and memory; whole shards read as tarfile reads them.

Every read here runs under `bounded`: a wall-clock alarm (a reader that loops forever fails
instead of hanging the suite) and tracemalloc's peak (a size field that lies must not cost
memory the file does not hold). The hand-made corpus holds one shard per way a header can lie;
the fuzz test mutates real shards (written by `diskinfo pack` and by tarfile in each format)
field by field, fixing the checksum so that the mutation reaches the parser behind it.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import random
import signal
import tarfile
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diskinfo.shards import tarstream
from diskinfo.shards.pack import pack
from diskinfo.shards.tarstream import ShardError, tar_members

SECONDS = 5  # per input; a shard of a few kB reads in about a millisecond
MiB = 1 << 20


class Overtime(Exception):
    pass


@contextlib.contextmanager
def alarm(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise Overtime(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def bounded(
    path: Path, keep: Callable[[str], bool] | None = None
) -> tuple[list[tuple[str, bytes | None]] | ShardError, int]:
    """The members, or the ShardError; and the peak of memory allocated while reading.
    Any other exception, or running past SECONDS, fails the calling test."""
    tracemalloc.start()
    try:
        with alarm(SECONDS):
            try:
                outcome: list[tuple[str, bytes | None]] | ShardError = list(tar_members(path, keep))
            except ShardError as exc:
                outcome = exc
        return outcome, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def one_line_error(path: Path, outcome: object) -> str:
    assert isinstance(outcome, ShardError), f"read without error: {outcome!r:.200}"
    message = str(outcome)
    assert "\n" not in message and message.startswith(f"{path}: ") and " at byte " in message
    return message


# hand-made shards ---------------------------------------------------------------------------


def header(name: str, size: int, kind: bytes = b"0", size_field: bytes | None = None) -> bytes:
    """A ustar header; `size_field` replaces the 12 size bytes as given (checksum fixed)."""
    info = tarfile.TarInfo(name)
    info.size, info.type = size, kind
    block = bytearray(info.tobuf(tarfile.USTAR_FORMAT))
    if size_field is not None:
        block[124:136] = size_field.ljust(12, b"\0")
    return fix_checksum(block)


def fix_checksum(block: bytearray) -> bytes:
    block[148:156] = b" " * 8
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def member(name: str, data: bytes, kind: bytes = b"0") -> bytes:
    return header(name, len(data), kind) + data + b"\0" * (-len(data) % 512)


END = b"\0" * 1024
SAMPLE = member("s/0001.jpg", b"J" * 700) + member("s/0001.cls", b"3")


def pax(records: bytes) -> bytes:
    return member("././@PaxHeader", records, b"x")


CORPUS: dict[str, tuple[bytes, str]] = {
    # a zero-length pax record once made the reader loop forever on one header
    "pax-zero-length": (pax(b"0 path=x\n") + SAMPLE + END, "bad pax record length at byte 512"),
    "pax-past-header": (pax(b"99 path=x\n") + SAMPLE + END, "does not fit at byte 512"),
    "pax-no-space": (pax(b"12path=xyz\n") + SAMPLE + END, "bad pax record length"),
    "pax-not-a-number": (pax(b"ab path=x\n") + SAMPLE + END, "bad pax record length"),
    "pax-no-newline": (pax(b"10 path=xy ") + SAMPLE + END, "does not fit"),
    "pax-no-key": (pax(b"7 =abc\n") + SAMPLE + END, "without key=value"),
    "pax-huge-size": (pax(b"20 size=99999999999\n") + SAMPLE + END, "over the limit"),
    "pax-signed-size": (pax(b"12 size=-12\n") + SAMPLE + END, "bad pax size"),
    "negative-octal-size": (
        header("a.jpg", 0, size_field=b"-0000000001") + b"x" * 4096 + END,
        "bad member size field",
    ),
    "negative-base256-size": (
        header("a.jpg", 0, size_field=b"\xff" * 12) + END,
        "bad member size field",
    ),
    # a base-256 size once raised OverflowError
    "base256-huge-size": (
        header("a.jpg", 0, size_field=b"\x80" + b"\x7f" * 11) + END,
        "over the limit",
    ),
    "size-not-octal": (header("a.jpg", 0, size_field=b"00000000009") + END, "bad member size"),
    "size-past-end": (header("a.jpg", 1 << 25) + b"x" * 600, "truncated"),
    "long-name-too-long": (header("././@LongLink", 4 << 20, b"L") + END, "over the limit"),
    "cut-at-member-boundary": (SAMPLE, "truncated at a member boundary"),
    "cut-in-header": (SAMPLE + SAMPLE[:100], "truncated in a header"),
    "cut-in-data": (SAMPLE[:800], "truncated"),
    "cut-in-padding": (SAMPLE[:1300], "truncated in a member's padding"),
    "empty": (b"", "truncated at a member boundary: no end-of-archive block at byte 0"),
    "not-a-tar": (b"hello, world\n" * 100, "not a tar file or a damaged header at byte 0"),
}


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_hostile_shards_end_in_one_line(tmp_path: Path, name: str) -> None:
    data, expected = CORPUS[name]
    for gzipped in (False, True):
        path = tmp_path / (f"{name}.tar.gz" if gzipped else f"{name}.tar")
        path.write_bytes(gzip.compress(data) if gzipped else data)
        outcome, peak = bounded(path)
        assert peak < 8 * MiB, (outcome, peak)
        message = one_line_error(path, outcome)
        assert expected in message, message


def test_a_lying_negative_size_costs_no_memory(tmp_path: Path) -> None:
    """A negative size once read the rest of the stream whole: 64 MiB of zeros gzip to 64 kB,
    and the reader held all of them before it said anything."""
    zeros = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip framing
    body = [zeros.compress(header("a.jpg", 0, size_field=b"-0000000001"))]
    body += [zeros.compress(b"\0" * MiB) for _ in range(64)] + [zeros.flush()]
    path = tmp_path / "bomb.tar.gz"
    path.write_bytes(b"".join(body))
    assert path.stat().st_size < 256 << 10
    outcome, peak = bounded(path)
    assert peak < 8 * MiB, peak
    assert "bad member size field" in one_line_error(path, outcome)


def test_a_shard_cut_anywhere_is_an_error(tmp_path: Path, shards: dict[str, bytes]) -> None:
    """Cut at every block boundary before the end-of-archive block (between members too,
    where the samples before the cut would once have been all one got, without a word)."""
    whole = shards["pack"]
    with tarfile.open(fileobj=io.BytesIO(whole)) as tar:
        last = tar.getmembers()[-1]
    end = last.offset_data + last.size + (-last.size % 512)
    assert len(list(tar_members(write(tmp_path / "whole.tar", whole)))) > 4
    for cut in range(0, end + 1, 512):
        path = write(tmp_path / f"cut-{cut}.tar", whole[:cut])
        outcome, _ = bounded(path)
        message = one_line_error(path, outcome)
        assert "truncated" in message, message
        offset = int(message.rsplit(" at byte ", 1)[1])
        assert offset <= cut, message


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_whole_shards_read_as_tarfile_reads_them(tmp_path: Path, shards: dict[str, bytes]) -> None:
    for name, data in shards.items():
        path = tmp_path / f"{name}.tar"
        path.write_bytes(data)
        with tarfile.open(path) as tar:
            theirs = [(m.name, tar.extractfile(m).read()) for m in tar if m.isfile()]  # type: ignore[union-attr]
        outcome, peak = bounded(path)
        assert outcome == theirs and theirs, name
        assert peak < 4 * MiB


# fuzzing ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Small real shards: one `diskinfo pack` wrote, and one per tarfile format with long and
    non-ASCII names, a directory and a link among the files."""
    root = tmp_path_factory.mktemp("seeds")
    rng = random.Random(7)
    for cls in ("ant", "bee"):
        (root / "src" / cls).mkdir(parents=True)
        for i in range(4):
            (root / "src" / cls / f"{i:02d}.jpg").write_bytes(rng.randbytes(rng.randint(1, 900)))
    pack(root / "src", root / "out", shards=1)
    found = {"pack": (root / "out" / "shard-000000.tar").read_bytes()}
    for label, fmt in (("ustar", tarfile.USTAR_FORMAT), ("gnu", tarfile.GNU_FORMAT)):
        found[label] = tarfile_shard(fmt, rng)
    found["pax"] = tarfile_shard(tarfile.PAX_FORMAT, rng)
    return found


def tarfile_shard(fmt: int, rng: random.Random) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        info = tarfile.TarInfo("d")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        names = ["d/0001.jpg", "d/0001.json", "e" * 80 + "/" + "f" * 80 + ".png"]
        if fmt != tarfile.USTAR_FORMAT:
            names += ["g" * 130 + ".cls"]
        if fmt == tarfile.PAX_FORMAT:
            names += ["класс/é.jpg"]
        for name in names:
            data = rng.randbytes(rng.randint(0, 1500))
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("d/0002.jpg")
        link.type, link.linkname = tarfile.SYMTYPE, "0001.jpg"
        tar.addfile(link)
    return out.getvalue()


FIELDS = {"name": (0, 100), "size": (124, 12), "type": (156, 1), "prefix": (345, 155)}
ODD_VALUES = [
    b"",
    b"-1",
    b"-0000000001",
    b"77777777777",
    b"\x80" + b"\x7f" * 11,
    b"\xff" * 12,
    b"\x80" + b"\0" * 10 + b"\x01",
    b"0",
    b"x",
    b"L",
    b"g",
    b"K",
    b"5",
    b"0 path=x\n",
]

mutation = st.one_of(
    st.tuples(st.just("byte"), st.integers(0, 1 << 16), st.integers(0, 255)),
    st.tuples(
        st.just("field"),
        st.integers(0, 1 << 8),
        st.sampled_from(sorted(FIELDS)),
        st.sampled_from(ODD_VALUES) | st.binary(max_size=12),
    ),
    st.tuples(
        st.just("pax"),
        st.integers(0, 1 << 8),
        st.sampled_from([b"0 path=x\n", b"30 size=1\n", b"5 a=\n", b"9 path=\n"])
        | st.binary(max_size=40),
    ),
    st.tuples(st.just("cut"), st.integers(0, 1 << 16)),
)


# every fuzz test: 400 inputs, each from one of the `shards` fixture's real shards
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SEEDS = st.sampled_from(["pack", "ustar", "gnu", "pax"])


def mutate(data: bytes, ops: list[tuple]) -> bytes:
    """Each op on a header block keeps its checksum right, so the parser behind the
    checksum sees the lie; a "byte" op may land anywhere and break it, as a disk would."""
    buf = bytearray(data)
    blocks = max(1, len(buf) // 512)
    for op in ops:
        if op[0] == "byte" and buf:
            buf[op[1] % len(buf)] = op[2]
        elif op[0] == "field" and len(buf) >= 512:
            start = 512 * (op[1] % blocks)
            offset, width = FIELDS[op[2]]
            block = bytearray(buf[start : start + 512])
            block[offset : offset + width] = op[3][:width].ljust(width, b"\0")
            buf[start : start + 512] = fix_checksum(block)
        elif op[0] == "pax":
            at = 512 * (op[1] % blocks)
            buf[at:at] = pax(op[2])
        elif op[0] == "cut":
            del buf[op[1] % (len(buf) + 1) :]
    return bytes(buf)


@FUZZ
@given(
    seed=SEEDS,
    ops=st.lists(mutation, min_size=1, max_size=4),
    wrap=st.sampled_from(["plain", "gzip", "gzip-damaged"]),
    damage=st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)),
    labels_only=st.booleans(),
)
def test_fuzzed_shards_give_samples_or_one_error_line(
    tmp_path_factory: pytest.TempPathFactory,
    shards: dict[str, bytes],
    seed: str,
    ops: list[tuple],
    wrap: str,
    damage: tuple[int, int],
    labels_only: bool,
) -> None:
    data = mutate(shards[seed], ops)
    if wrap != "plain":
        data = bytearray(gzip.compress(data, mtime=0))
        if wrap == "gzip-damaged":
            data[damage[0] % len(data)] ^= damage[1]
    path = fuzz_dir(tmp_path_factory) / f"fuzzed{'.tar.gz' if wrap != 'plain' else '.tar'}"
    path.write_bytes(data)
    keep = (lambda name: name.endswith(".cls")) if labels_only else None  # skips, as mixing
    outcome, peak = bounded(path, keep)
    if isinstance(outcome, ShardError):
        one_line_error(path, outcome)
    else:
        assert all(isinstance(n, str) and isinstance(d, bytes | None) for n, d in outcome)
    assert peak < 8 * MiB + 4 * len(data), peak


_FUZZ_DIR: list[Path] = []


def fuzz_dir(factory: pytest.TempPathFactory) -> Path:
    if not _FUZZ_DIR:
        _FUZZ_DIR.append(factory.mktemp("fuzz"))
    return _FUZZ_DIR[0]


# spans of members against one member at a time ---------------------------------------------


@contextlib.contextmanager
def one_at_a_time() -> Iterator[None]:
    """The reader as it is without numpy: every header parsed and checked on its own."""
    saved = tarstream._numpy
    tarstream._numpy = lambda: None  # type: ignore[assignment]
    try:
        yield
    finally:
        tarstream._numpy = saved


def outcome_of(path: Path, keep: Callable[[str], bool] | None) -> object:
    try:
        return list(tar_members(path, keep))
    except ShardError as exc:
        return f"ShardError: {exc}"


@FUZZ
@given(
    seed=SEEDS,
    ops=st.lists(mutation, min_size=0, max_size=4),
    labels_only=st.booleans(),
)
def test_runs_read_what_one_at_a_time_reads(
    tmp_path_factory: pytest.TempPathFactory,
    shards: dict[str, bytes],
    seed: str,
    ops: list[tuple],
    labels_only: bool,
) -> None:
    """The same members, or the same error at the same byte, with a header's every field
    lying: a span takes only what the member-by-member reader would take as it is."""
    path = fuzz_dir(tmp_path_factory) / "spans.tar"
    path.write_bytes(mutate(shards[seed], ops))
    keep = (lambda name: name.endswith(".cls")) if labels_only else None
    in_runs = outcome_of(path, keep)
    with one_at_a_time():
        assert outcome_of(path, keep) == in_runs


def test_a_packed_shard_is_read_in_spans(
    tmp_path: Path, shards: dict[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard of `diskinfo pack` (and of tarfile, short names) goes in spans: the header by
    header reader sees only its end-of-archive block. Members bigger than one read (4 MiB)
    and a read ending inside a member are taken up by the next span or read alone."""
    calls: list[int] = []
    one = tarstream._Reader.member

    def counted(self: tarstream._Reader, keep: Callable[[str], bool] | None) -> object:
        calls.append(self.offset)
        return one(self, keep)

    monkeypatch.setattr(tarstream._Reader, "member", counted)
    path = write(tmp_path / "pack.tar", shards["pack"])
    assert len(list(tar_members(path))) == 8 and len(calls) == 1

    rng = random.Random(5)
    sizes = [700, 3 * MiB, 5 * MiB, 100, 4 * MiB - 512, 4 * MiB - 1024, 1]
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for i, size in enumerate(sizes):
            info = tarfile.TarInfo(f"big/{i:02d}.bin")
            info.size = size
            tar.addfile(info, io.BytesIO(rng.randbytes(size)))
    path = write(tmp_path / "big.tar", out.getvalue())
    calls.clear()
    got = list(tar_members(path))
    assert [len(d) for _, d in got] == sizes  # type: ignore[arg-type]
    with tarfile.open(path) as tar:
        assert got == [(m.name, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]
    assert len(calls) == 2  # the 5 MiB member, and the end


class CountingFile(io.FileIO):
    """A file that counts the bytes read from it, beneath any buffer."""

    read_bytes = 0

    def readinto(self, buffer: Any) -> int | None:
        got = super().readinto(buffer)
        CountingFile.read_bytes += got or 0
        return got


@pytest.mark.parametrize("every", [1, 10])
def test_pax_headers_cost_no_reading_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, every: int
) -> None:
    """A pax header before every member (names over 100 bytes or not ASCII: pack writes them
    so) made each member's span read 4 MiB again: 20x the time of reading member by member;
    one before every 10th, 4x. Now the shard's bytes are read at most 3 times over."""
    rng = random.Random(every)
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(300):
            folder = "long-class-name-" * 7 if i % every == 0 else "c"
            for ext, size in (("jpg", rng.randint(1000, 9000)), ("cls", 1)):
                info = tarfile.TarInfo(f"{folder}/{i:05d}.{ext}")
                info.size = size
                tar.addfile(info, io.BytesIO(rng.randbytes(size)))
    path = write(tmp_path / "pax.tar", out.getvalue())

    def opened(name: Path, mode: str, buffering: int) -> io.BufferedReader:
        return io.BufferedReader(CountingFile(name), buffering)

    monkeypatch.setattr(tarstream, "open", opened, raising=False)
    CountingFile.read_bytes = 0
    got = list(tar_members(path))
    with tarfile.open(path) as tar:
        assert got == [(m.name, tar.extractfile(m).read()) for m in tar]  # type: ignore[union-attr]
    assert CountingFile.read_bytes <= 3 * path.stat().st_size, CountingFile.read_bytes


# what cannot be given whole, or would leave its folder as a key ---------------------------


def test_a_small_gzip_of_a_huge_member_is_refused_before_it_costs_memory(tmp_path: Path) -> None:
    """A 0.5 MB .tar.gz with one 512 MiB member of zeros cost each reader 1.45 GiB."""
    size = 512 * MiB
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = [packer.compress(header("big.bin", size))]
    body += [packer.compress(b"\0" * (8 * MiB)) for _ in range(size // (8 * MiB))]
    body += [packer.compress(b"\0" * (-size % 512) + END), packer.flush()]
    path = tmp_path / "bomb.tar.gz"
    path.write_bytes(b"".join(body))
    assert path.stat().st_size < 1 * MiB
    outcome, peak = bounded(path)
    assert peak < 8 * MiB, peak
    message = one_line_error(path, outcome)
    # the gunzipped tar may reach 200 times the shard's size; the header took 512 bytes of that
    limit = int(message.split("over the limit of ")[1].split()[0])
    assert "member size 536870912 over the limit" in message
    assert limit == 200 * path.stat().st_size - 512, message


def test_a_gzipped_shard_gunzips_to_its_ratio_and_floor(tmp_path: Path) -> None:
    """Within the floor a member of zeros reads whole, as before."""
    data = member("a/0001.npy", b"\0" * (32 * MiB)) + END
    path = tmp_path / "zeros.tar.gz"
    path.write_bytes(gzip.compress(data))
    ((name, got),) = list(tar_members(path))
    assert name == "a/0001.npy" and len(got) == 32 * MiB


SPARSE = {
    "gnu-old-sparse": header("s/0001.bin", 0, b"S") + END,
    "pax-sparse": pax(b"22 GNU.sparse.major=1\n22 GNU.sparse.minor=0\n")
    + member("s/0001.bin", b"\0" * 512)
    + END,
}


@pytest.mark.parametrize("name", sorted(SPARSE))
def test_gnu_sparse_members_are_an_error_not_a_silent_drop(tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.tar"
    path.write_bytes(SAMPLE + SPARSE[name])
    outcome, _ = bounded(path)
    assert "a GNU sparse member: not supported" in one_line_error(path, outcome)


@pytest.mark.parametrize("bad", ["../../etc/cron.d/x.cls", "/etc/passwd.cls", "a/../../b.jpg"])
@pytest.mark.parametrize("gzipped", [False, True])
def test_names_that_leave_their_folder_are_refused(tmp_path: Path, bad: str, gzipped: bool):
    """After a span of plain members (read in bulk) and alone; `..` inside a word is a name."""
    fine = b"".join(member(f"s/{i:04d}..v2.jpg", b"J" * 300) for i in range(20))
    data = fine + member(bad, b"x") + END
    path = tmp_path / ("bad.tar.gz" if gzipped else "bad.tar")
    path.write_bytes(gzip.compress(data) if gzipped else data)
    outcome, _ = bounded(path)
    message = one_line_error(path, outcome)
    assert f"{bad!r} leaves its folder" in message
    assert f"at byte {len(fine)}" in message
    path.write_bytes(fine + END)
    assert len(list(tar_members(path))) == 20
