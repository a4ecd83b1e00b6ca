"""Per-mount NFS figures for watched paths on NFS, from /proc/self/mountstats."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from diskinfo.collectors import BaseCollector, rates
from diskinfo.record import IntervalRecord
from diskinfo.sources import mountstats
from diskinfo.sources.mountstats import NfsMount


class NfsCollector(BaseCollector):
    """Keeps the previous mountstats snapshot of the watched NFS mounts."""

    def __init__(
        self,
        mountpoints: Sequence[str],
        read: Callable[[], str] = mountstats.read,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.mountpoints = list(dict.fromkeys(mountpoints))
        self._read = read
        self._clock = clock
        self._prev: dict[str, NfsMount] = {}
        self._prev_t: float | None = None

    def _snapshot(self, warnings: list[str]) -> dict[str, NfsMount] | None:
        try:
            text = self._read()
        except OSError as exc:
            warnings.append(f"nfs: cannot read {mountstats.PATH}: {exc.strerror or exc}")
            return None
        mounts, errors = mountstats.parse(text)
        if errors:
            warnings.append(f"nfs: malformed line skipped: {errors[0]}")
        # the last entry wins when mounts are stacked on one mount point
        return {m.mountpoint: m for m in mounts if m.mountpoint in self.mountpoints}

    def start(self) -> None:
        snap = self._snapshot([])
        self._prev = snap or {}
        self._prev_t = self._clock()

    def fill(self, record: IntervalRecord) -> None:
        if not self.mountpoints:
            return
        snap = self._snapshot(record.warnings)
        now = self._clock()
        if snap is None:
            return
        dt = now - self._prev_t if self._prev_t is not None else 0.0
        for mp in self.mountpoints:
            cur, prev = snap.get(mp), self._prev.get(mp)
            if cur is None:
                record.warnings.append(f"nfs: {mp} is not in {mountstats.PATH} (unmounted?)")
                continue
            if prev is None or dt <= 0:
                continue
            fig = rates.nfs_figures(prev, cur, dt)
            if fig is None:
                record.warnings.append(f"nfs: {mp} was remounted: counting from now")
                continue
            record.nfs.append(fig)
        self._prev = snap
        self._prev_t = now
