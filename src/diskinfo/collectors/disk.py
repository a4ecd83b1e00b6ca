"""Block-device figures for the devices behind the watched paths, from /proc/diskstats.

One read of /proc/diskstats per interval gives every counter of every device at one instant,
so the iostat figures of one device are computed from one consistent snapshot. psutil's
disk_io_counters reads the same file but lacks in-flight, weighted time, discard and flush;
a second read for those would pair counters of different instants, so it is not used here.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from diskinfo.collectors import BaseCollector, rates
from diskinfo.collectors.watched import WatchedPaths
from diskinfo.record import IntervalRecord
from diskinfo.sources import diskstats
from diskinfo.sources.diskstats import ALL_FIELDS, DiskCounters
from diskinfo.sources.procfile import ProcFile

RERESOLVE_S = 10.0  # after a device vanished, look for it again at most this often


class DiskCollector(BaseCollector):
    """Keeps the previous snapshot per device and turns deltas into DeviceFigures."""

    def __init__(
        self,
        watched: WatchedPaths,
        read: Callable[[], str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.watched = watched
        self._read = read or ProcFile(diskstats.PATH)
        self._clock = clock
        self._prev: dict[str, DiskCounters] = {}
        self._prev_t: float | None = None
        self._resolved_at = 0.0

    # --- Collector protocol ---------------------------------------------------------
    def start(self) -> None:
        self._resolved_at = self._clock()
        if not self.watched.resolved:  # `diskinfo watch` resolved it already
            self._resolve()
        snap, errors = self._snapshot()
        for error in errors:
            self.notes.later(error)
        if snap is not None:
            self._prev = {n: c for n, c in snap.items() if n in self.watched.devices}
            self._prev_t = self._clock()

    def fill(self, record: IntervalRecord) -> None:
        self.notes.flush(record)
        snap, errors = self._snapshot()
        now = self._clock()
        record.warnings.extend(errors)
        if snap is None:
            return  # unreadable this time: keep the old baseline, the next delta spans both
        dt = now - self._prev_t if self._prev_t is not None else 0.0
        devices = self.watched.devices
        missing = [name for name in devices if name not in snap]
        if missing and now - self._resolved_at >= RERESOLVE_S:
            self._resolved_at = self._clock()
            self._resolve()  # its warnings go with the next record
            devices = self.watched.devices
            missing = [name for name in devices if name not in snap]
        for name in missing:
            record.warnings.append(f"disk: {name} is not in /proc/diskstats (removed?)")
            self._prev.pop(name, None)
        for name, paths in devices.items():
            cur = snap.get(name)
            if cur is None:
                continue
            prev = self._prev.get(name)
            self._prev[name] = cur
            if prev is None or dt <= 0:
                if self._prev_t is not None and prev is None:
                    record.warnings.append(f"disk: {name} appeared: counting from now")
                continue
            fig = rates.figures(prev, cur, dt)
            if fig is None:
                record.warnings.append(
                    f"disk: counters of {name} went back (device reset or re-added): "
                    "counting from now"
                )
                continue
            fig.paths = list(paths)
            fig.elapsed_s = dt
            fig.counters = counters_of(cur)
            record.devices.append(fig)
        self._prev_t = now

    # --- helpers ----------------------------------------------------------------------
    def _snapshot(self) -> tuple[dict[str, DiskCounters] | None, list[str]]:
        try:
            text = self._read()
        except OSError as exc:
            return None, [f"disk: cannot read {diskstats.PATH}: {exc.strerror or exc}"]
        names = self.watched.devices.keys() or None
        snap, errors = diskstats.parse(text, names)
        if not errors:
            return snap, []
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return snap, [f"disk: malformed line skipped: {errors[0]}{more}"]

    def _resolve(self) -> None:
        for warning in self.watched.resolve():
            self.notes.later(f"disk: {warning}")


def counters_of(c: DiskCounters) -> dict[str, int]:
    """The cumulative counters as exported (diskstats field names; discard/flush if present)."""
    known = c.reported
    out = dict(zip(ALL_FIELDS[:known], c[3 : 3 + known], strict=True))
    del out["in_flight"]  # a gauge, in the figures
    return out
