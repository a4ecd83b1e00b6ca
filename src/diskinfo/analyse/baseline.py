"""The device's measured bandwidth and IOPS (from `diskinfo bench`), keyed by the device's identity.

Verdicts compare the read rate they see with what the device delivered when measured, because
nominal figures and %util say little about NVMe, RAID or network block storage. The store is
kept where it outlives a container (`$LOG_DIR`, a mounted volume in the image), and each entry
carries the disk's identity (model, serial or WWN, size: `diskinfo.sources.blockid`), so a
measurement follows its disk across renames and is never applied to another disk that carries
the same kernel name. docs/report.md describes the file.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from diskinfo import logfiles
from diskinfo.fileio import make_dirs, write_atomic
from diskinfo.loader_state import STATE_DIR_ENV
from diskinfo.sources.blockid import DeviceIdentity, block_devices, read_identity

SCHEMA = "diskinfo.baseline/2"  # /1 (keyed by kernel name, no identity) is read, never used
BASELINE_ENV = "DISKINFO_BASELINE"
LOG_DIR_ENV = "LOG_DIR"
FILE_NAME = logfiles.BASELINE
REMATCH_S = 60.0  # the monitor re-checks identities this often (a disk swapped under its name)
RESTAT_S = 5.0  # ... and whether the store changed this often: a stat per sample is a syscall

Identify = Callable[[str], DeviceIdentity | None]


@dataclass
class DeviceBaseline:
    device: str  # kernel name when measured (the identity, not the name, decides a match)
    seq_read_mb_s: float  # 1 MiB direct reads, queue depth 1 (MB = 2**20 bytes)
    rand_read_iops: float  # 4 KiB direct random reads, queue depth 1
    rand_read_lat_ms: float = 0.0
    path: str = ""  # the file that was read
    size_mb: float = 0.0
    measured_at: float = 0.0  # Unix seconds
    identity: DeviceIdentity | None = None  # None: an old-format entry, matched to no disk

    def to_dict(self) -> dict:
        out = asdict(self)
        out["identity"] = self.identity.to_dict() if self.identity is not None else None
        return out


def default_path(environ: Mapping[str, str] = os.environ) -> Path:
    """$DISKINFO_BASELINE; else $LOG_DIR/diskinfo-baseline.json (the image sets LOG_DIR to the
    mounted logs directory, so the baseline outlives the container); else the old default:
    $DISKINFO_STATE_DIR/baseline.json, else ~/.cache/diskinfo/baseline.json. The start banner
    says where it is with the same rule."""
    env = environ.get(BASELINE_ENV)
    if env:
        return Path(env)
    log_dir = environ.get(LOG_DIR_ENV)
    if log_dir:
        return Path(log_dir) / FILE_NAME
    state = environ.get(STATE_DIR_ENV)
    if state:
        return Path(state) / "baseline.json"
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "diskinfo" / "baseline.json"


def _entry(data: object, device: str | None = None) -> DeviceBaseline:
    """One stored entry; ValueError/TypeError/AttributeError for anything malformed."""
    names = {f.name for f in fields(DeviceBaseline)} - {"identity"}
    items = {k: v for k, v in data.items() if k in names}  # type: ignore[union-attr]
    if device is not None:
        items["device"] = device
    base = DeviceBaseline(**items)
    base.device = str(base.device)
    for name in ("seq_read_mb_s", "rand_read_iops", "rand_read_lat_ms", "size_mb", "measured_at"):
        value = getattr(base, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            raise ValueError(f"{name} is not a number: {value!r}")
        setattr(base, name, float(value))
    if not isinstance(base.path, str):
        raise ValueError(f"path is not text: {base.path!r}")
    identity = data.get("identity")  # type: ignore[union-attr]
    base.identity = None if identity is None else DeviceIdentity.from_dict(identity)
    return base


def parse(text: str) -> list[DeviceBaseline]:
    """Every entry of a store, old format (/1) included; entries that do not parse are dropped
    (ValueError only if the text is not JSON)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"baseline file is not JSON: {exc}") from None
    devices = data.get("devices") if isinstance(data, dict) else None
    if isinstance(devices, dict):  # /1: {"vda": {...}}, keyed by kernel name
        pairs: Iterable[tuple[str | None, object]] = devices.items()
    elif isinstance(devices, list):  # /2: [{..., "identity": {...}}]
        pairs = ((None, entry) for entry in devices)
    else:
        return []
    out = []
    for device, entry in pairs:
        try:
            out.append(_entry(entry, device))
        except (TypeError, ValueError, AttributeError):
            continue
    return out


def read_store(path: Path | None = None) -> list[DeviceBaseline]:
    """Every stored entry; none (empty) when the file is missing, unreadable or not JSON."""
    try:
        return parse((path or default_path()).read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return []


def match(
    entries: Iterable[DeviceBaseline], identify: Identify, names: Iterable[str]
) -> dict[str, DeviceBaseline]:
    """Baselines by the kernel name their disk has now: an entry applies to the device whose
    identity equals the stored one, under whatever name it has (first the stored name, then
    any of `names`); entries without identity, or whose disk is gone, apply to none."""
    entries = [e for e in entries if e.identity is not None]
    out: dict[str, DeviceBaseline] = {}
    missing = []
    for entry in entries:
        if identify(entry.device) == entry.identity:
            out[entry.device] = entry
        else:
            missing.append(entry)
    if missing:
        wanted = {e.identity: e for e in missing}
        for name in names:
            if name not in out and (found := wanted.get(identify(name))) is not None:
                out[name] = found
    return out


def load(path: Path | None = None, identify: Identify = read_identity) -> dict[str, DeviceBaseline]:
    """The stored baselines that apply to this machine's disks, by their kernel names now."""
    return match(read_store(path), identify, block_devices())


def save(entries: list[DeviceBaseline], path: Path | None = None) -> Path:
    """Merge `entries` into the store, atomically and durably (the monitor may read it at any
    time; a measurement is worth keeping). An entry replaces the stored one of the same disk;
    old-format entries (no identity) are dropped: they cannot be matched to a disk."""
    path = path or default_path()
    merged = {e.identity: e for e in read_store(path) if e.identity is not None}
    for entry in entries:
        if entry.identity is None:
            raise ValueError(f"baseline for {entry.device} has no device identity")
        merged[entry.identity] = entry
    make_dirs(path.parent)
    ordered = sorted(merged.values(), key=lambda e: (e.device, -e.measured_at))
    payload = {"schema": SCHEMA, "devices": [e.to_dict() for e in ordered]}
    # `docker exec CONTAINER diskinfo bench` runs as root: the file stays the logs' owner's
    write_atomic(path, json.dumps(payload, indent=2) + "\n", durable=True, owned=True)
    return path


class BaselineCache:
    """The store as the monitor sees it: re-read when the file changes (looked at every
    RESTAT_S: a `diskinfo bench` run while the monitor is running takes effect within 5 s)
    and re-matched to the disks every REMATCH_S (a disk swapped under the same name loses its
    baseline)."""

    def __init__(
        self,
        path: Path | None = None,
        identify: Identify = read_identity,
        names: Callable[[], Iterable[str]] = block_devices,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.path = path or default_path()
        self._identify = identify
        self._names = names
        self._clock = clock or time.monotonic
        self._stamp: tuple[int, int] | None = None
        self._matched_at = float("-inf")
        self._statted_at = float("-inf")
        self._entries: list[DeviceBaseline] = []
        self._data: dict[str, DeviceBaseline] = {}

    def __call__(self) -> dict[str, DeviceBaseline]:
        now = self._clock()
        if now - self._statted_at >= RESTAT_S:
            self._statted_at = now
            try:
                st = self.path.stat()
                stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
            except OSError:
                stamp = None
            if stamp != self._stamp:
                self._stamp = stamp
                self._entries = read_store(self.path) if stamp is not None else []
                self._matched_at = float("-inf")
        if now - self._matched_at >= REMATCH_S:
            self._matched_at = now
            self._data = (
                match(self._entries, self._identify, self._names()) if self._entries else {}
            )
        return self._data
