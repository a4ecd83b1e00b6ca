"""This process's own cgroup (the container's) on the watched devices: its I/O and its limits.

/proc/diskstats is the whole device's, shared with everything else on the host; a container
whose cgroup caps its IOPS or bandwidth waits while the device looks idle. The cgroup's own
counters give the container's rates, its throttle files the limits, io.pressure (PSI) the
share of time its tasks stalled on I/O. Cost per interval: one or two preads of the counter
files (kept open, ProcFile); io.pressure is read every PRESSURE_S, the limits every LIMITS_S.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from diskinfo.collectors import BaseCollector
from diskinfo.collectors.watched import WatchedPaths
from diskinfo.record import CgroupIO, IntervalRecord
from diskinfo.sources import ParseError, cgroup, mountinfo
from diskinfo.sources.cgroup import LIMIT_KEYS, V1_LIMIT_FILES, Location
from diskinfo.sources.procfile import ProcFile
from diskinfo.sources.sysfs import SysFs
from diskinfo.thresholds import THROTTLED_SHARE

LIMITS_S = 30.0  # limits change rarely (docker update, systemctl set-property): re-read this often
# PSI's averages are recomputed every 2 s (the kernel's PSI_FREQ): a read in between gives
# the same figures, for a syscall that costs as much cold as a sample's Python
PRESSURE_S = 2.0
LIMIT_OF = {  # limit key -> the rate it caps
    "read_bps": "read_bytes_s",
    "write_bps": "write_bytes_s",
    "read_iops": "read_ios_s",
    "write_iops": "write_ios_s",
}


def own_locations() -> list[Location]:
    """Where this process's cgroup lives (v2 first, then v1 blkio), from /proc/self."""
    memberships = cgroup.parse_proc_cgroup(cgroup.read(cgroup.PROC_CGROUP))
    mounts, _errors = mountinfo.parse(mountinfo.read())
    return cgroup.locate(memberships, mounts)


def throttled_by(fig: CgroupIO) -> list[str]:
    out = []
    for key, rate in LIMIT_OF.items():
        limit = getattr(fig, key)
        if limit and getattr(fig, rate) >= THROTTLED_SHARE * limit:
            out.append(key)
    return out


class CgroupCollector(BaseCollector):
    """Keeps the previous counters of the cgroup and fills `record.cgroup_io`."""

    def __init__(
        self,
        watched: WatchedPaths,
        locations: Callable[[], list[Location]] = own_locations,
        sysfs: SysFs | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.watched = watched  # its device map: the disk collector's, re-resolved there
        self._locations = locations
        self._sysfs = sysfs or SysFs()
        self._clock = clock
        self.location: Location | None = None  # where the counters come from
        self._counter_files: list[tuple[ProcFile, str]] = []  # (file, unit or "v2")
        self._pressure: ProcFile | None = None
        self._pressure_at = float("-inf")
        self._pressure_avg: dict[str, float] | None = None
        self._prev: dict[str, dict[str, int]] | None = None
        self._limits: dict[str, dict[str, int | None]] = {}
        self._limits_at: float | None = None
        self._majmin: dict[str, str] = {}
        self._pairs: list[tuple[str, str]] = []  # (name, majmin) of the watched devices
        self._pairs_of: dict[str, list[str]] | None = None  # the device map they were made for

    # --- Collector protocol ---------------------------------------------------------
    def start(self) -> None:
        try:
            found = self._locations()
        except (OSError, ParseError) as exc:
            self.notes.once(f"cgroup: cannot find this process's cgroup: {exc}")
            return
        for loc in found:
            if loc.version == 2 and cgroup.exists(loc.directory, "io.stat"):
                self._counter_files = [(ProcFile(os.path.join(loc.directory, "io.stat")), "v2")]
                self.location = loc
                break
            if loc.version == 1:
                files = []
                for name, unit in (("io_service_bytes", "bytes"), ("io_serviced", "ios")):
                    # the recursive files count the container's sub-cgroups too
                    for suffix in ("_recursive", ""):
                        fname = f"blkio.throttle.{name}{suffix}"
                        if cgroup.exists(loc.directory, fname):
                            files.append((ProcFile(os.path.join(loc.directory, fname)), unit))
                            break
                if len(files) == 2:
                    self._counter_files = files
                    self.location = loc
                    break
        v2 = next((loc for loc in found if loc.version == 2), None)
        if v2 is not None and cgroup.exists(v2.directory, "io.pressure"):
            self._pressure = ProcFile(os.path.join(v2.directory, "io.pressure"))
        if self.location is None:
            self.notes.once(
                "cgroup: no per-cgroup I/O accounting here (no io.stat or blkio.throttle files "
                "in this process's cgroup): only whole-device figures"
            )
            return
        self._prev = self._counters()

    def fill(self, record: IntervalRecord) -> None:
        self.notes.flush(record)
        if self.location is None:
            return
        cur = self._counters()
        if cur is None:
            self.notes.flush(record)
            return  # keep the old baseline: the next delta spans both intervals
        prev, self._prev = self._prev, cur
        now = self._clock()
        if self._limits_at is None or now - self._limits_at >= LIMITS_S:
            self._limits = self._read_limits()
            self._limits_at = now
        pressure = self._read_pressure(now) or {}
        some, full = pressure.get("some_avg10"), pressure.get("full_avg10")
        dt = record.elapsed_s
        for name, majmin in self._watched():
            now_c = cur.get(majmin, {})
            limits = self._limits.get(majmin, {})
            fig = CgroupIO(
                device=name,
                majmin=majmin,
                cgroup=self.location.directory,
                version=self.location.version,
                counters=dict(now_c),
                pressure_some_avg10=some,
                pressure_full_avg10=full,
                **limits,  # type: ignore[arg-type]
            )
            before = prev.get(majmin, {}) if prev is not None else {}
            if any(now_c.get(k, 0) < v for k, v in before.items()):
                record.warnings.append(
                    f"cgroup: counters of {name} went back (cgroup recreated?): counting from now"
                )
            elif prev is not None and dt > 0:
                get, was = now_c.get, before.get
                fig.read_bytes_s = (get("read_bytes", 0) - was("read_bytes", 0)) / dt
                fig.write_bytes_s = (get("write_bytes", 0) - was("write_bytes", 0)) / dt
                fig.read_ios_s = (get("read_ios", 0) - was("read_ios", 0)) / dt
                fig.write_ios_s = (get("write_ios", 0) - was("write_ios", 0)) / dt
            if any(limits.values()):
                fig.throttled_by = throttled_by(fig)
                fig.throttled = bool(fig.throttled_by)
            record.cgroup_io.append(fig)

    def stop(self) -> None:
        for f, _unit in self._counter_files:
            f.close()
        if self._pressure is not None:
            self._pressure.close()

    # --- helpers ----------------------------------------------------------------------
    def _counters(self) -> dict[str, dict[str, int]] | None:
        out: dict[str, dict[str, int]] = {}
        watched = [majmin for _name, majmin in self._watched()]
        for f, unit in self._counter_files:
            try:
                text = f.read()
                parsed = (
                    cgroup.parse_io_stat(text, watched)
                    if unit == "v2"
                    else cgroup.parse_v1_stat(text, unit, watched)
                )
            except OSError as exc:
                self.notes.once(f"cgroup: cannot read {f.path}: {exc.strerror or exc}")
                return None
            except ParseError as exc:
                self.notes.once(f"cgroup: {f.path}: {exc}")
                return None
            for devno, values in parsed.items():
                out.setdefault(devno, {}).update(values)
        return out

    def _read_limits(self) -> dict[str, dict[str, int | None]]:
        """The tightest limit per device over the cgroup and its visible ancestors (a parent's
        limit caps its children too)."""
        loc = self.location
        assert loc is not None
        out: dict[str, dict[str, int | None]] = {}

        def tighten(devno: str, key: str, value: int | None) -> None:
            limits = out.setdefault(devno, dict.fromkeys(LIMIT_KEYS))
            if value and (limits[key] is None or value < limits[key]):  # type: ignore[operator]
                limits[key] = value

        directory = loc.directory
        for _ in range(32):
            try:
                if loc.version == 2:
                    if cgroup.exists(directory, "io.max"):
                        text = cgroup.read(os.path.join(directory, "io.max"))
                        for devno, limits in cgroup.parse_io_max(text).items():
                            for key, value in limits.items():
                                tighten(devno, key, value)
                else:
                    for key, fname in V1_LIMIT_FILES.items():
                        if cgroup.exists(directory, fname):
                            text = cgroup.read(os.path.join(directory, fname))
                            for devno, value in cgroup.parse_v1_limit(text).items():
                                tighten(devno, key, value)
            except (OSError, ParseError) as exc:
                self.notes.once(f"cgroup: limits in {directory}: {exc}")
            parent = os.path.dirname(directory)
            if parent == directory or not cgroup.exists(parent, "cgroup.procs"):
                break  # the top of what this process can see of the hierarchy
            directory = parent
        return out

    def _read_pressure(self, now: float) -> dict[str, float] | None:
        if self._pressure is None:
            return None
        if now - self._pressure_at < PRESSURE_S:
            return self._pressure_avg
        self._pressure_at = now
        try:
            self._pressure_avg = cgroup.pressure_avg10(self._pressure.read())
        except (OSError, ParseError) as exc:
            self.notes.once(f"cgroup: {self._pressure.path}: {exc}")
            self._pressure_avg = None
        return self._pressure_avg

    def _watched(self) -> list[tuple[str, str]]:
        """(name, majmin) of the watched devices that /sys knows, worked out again only when
        the device map changed (a re-resolution) or a device was not in /sys yet."""
        devices = self.watched.devices
        if devices is not self._pairs_of or len(self._pairs) < len(devices):
            self._pairs_of = devices
            pairs = ((name, self._majmin_of(name)) for name in devices)
            self._pairs = [(name, majmin) for name, majmin in pairs if majmin is not None]
        return self._pairs

    def _majmin_of(self, name: str) -> str | None:
        if name not in self._majmin:
            devno = self._sysfs.read(f"class/block/{name}/dev")
            if not devno:
                return None
            self._majmin[name] = devno
        return self._majmin[name]
