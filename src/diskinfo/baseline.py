"""The device's measured bandwidth and IOPS (from `diskinfo bench`), keyed by kernel device name.

Verdicts compare the read rate they see with what the device delivered when measured, because
nominal figures and %util say little about NVMe, RAID or network block storage.
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import random
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from diskinfo.errors import UserError
from diskinfo.loader_state import STATE_DIR_ENV

SCHEMA = "diskinfo.baseline/1"
BASELINE_ENV = "DISKINFO_BASELINE"


@dataclass
class DeviceBaseline:
    device: str
    seq_read_mb_s: float  # 1 MiB direct reads, queue depth 1 (MB = 2**20 bytes)
    rand_read_iops: float  # 4 KiB direct random reads, queue depth 1
    rand_read_lat_ms: float = 0.0
    path: str = ""  # the file that was read
    size_mb: float = 0.0
    measured_at: float = 0.0  # Unix seconds


def default_path() -> Path:
    """$DISKINFO_BASELINE; else $DISKINFO_STATE_DIR/baseline.json where that is set (the image
    sets it, so `diskinfo bench` and the monitor agree); else ~/.cache/diskinfo/baseline.json."""
    env = os.environ.get(BASELINE_ENV)
    if env:
        return Path(env)
    state = os.environ.get(STATE_DIR_ENV)
    if state:
        return Path(state) / "baseline.json"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "diskinfo" / "baseline.json"


def parse(text: str) -> dict[str, DeviceBaseline]:
    """Baselines by device; entries that do not parse are dropped (ValueError if none is JSON)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"baseline file is not JSON: {exc}") from None
    devices = data.get("devices", {}) if isinstance(data, dict) else {}
    names = {f.name for f in fields(DeviceBaseline)}
    out: dict[str, DeviceBaseline] = {}
    for device, entry in devices.items() if isinstance(devices, dict) else ():
        try:
            base = DeviceBaseline(**{k: v for k, v in entry.items() if k in names})
            base.seq_read_mb_s = float(base.seq_read_mb_s)
            base.rand_read_iops = float(base.rand_read_iops)
        except (TypeError, ValueError, AttributeError):
            continue
        out[str(device)] = base
    return out


def load(path: Path | None = None) -> dict[str, DeviceBaseline]:
    """Stored baselines; none (empty) when the file is missing or unreadable."""
    try:
        return parse((path or default_path()).read_text())
    except (OSError, ValueError):
        return {}


def save(entries: list[DeviceBaseline], path: Path | None = None) -> Path:
    """Merge `entries` into the store, atomically (the monitor may read it at any time)."""
    path = path or default_path()
    merged = load(path)
    for entry in entries:
        merged[entry.device] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"schema": SCHEMA, "devices": {k: asdict(v) for k, v in sorted(merged.items())}}
    fd, tmp = tempfile.mkstemp(prefix=".baseline-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(payload, handle, indent=2)
            handle.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


class BaselineCache:
    """The store as the monitor sees it: re-read only when the file changes (a `diskinfo bench`
    run while the monitor is running takes effect at the next interval)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or default_path()
        self._stamp: tuple[int, int] | None = None
        self._data: dict[str, DeviceBaseline] = {}

    def __call__(self) -> dict[str, DeviceBaseline]:
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            self._data = load(self.path) if stamp is not None else {}
        return self._data


# --- measuring (`diskinfo bench`) ---

SEQ_BLOCK = 1 << 20
RAND_BLOCK = 4096


@dataclass
class ReadResult:
    ios: int
    nbytes: int
    seconds: float

    @property
    def mb_s(self) -> float:
        return self.nbytes / 2**20 / self.seconds if self.seconds > 0 else 0.0

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
