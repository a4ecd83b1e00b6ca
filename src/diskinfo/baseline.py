"""The device's measured bandwidth and IOPS (from `diskinfo bench`), keyed by kernel device name.

Verdicts compare the read rate they see with what the device delivered when measured, because
nominal figures and %util say little about NVMe, RAID or network block storage.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path

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
