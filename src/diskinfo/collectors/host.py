"""Host figures: CPU busy and iowait from /proc/stat deltas, page cache vs. dataset size, /dev/shm.

Parsers take the file's text; only `HostCollector` opens files. The dataset size is measured
once in a background thread (a walk over millions of files must not delay a sample) and
refreshed every `DATASET_REFRESH_S` (datasets rarely change during a run; a walk over a
million files costs seconds of CPU, so refreshing it often would dominate the monitor's cost).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from diskinfo.record import HostFigures, IntervalRecord
from diskinfo.sources.procfile import ProcFile

DATASET_REFRESH_S = 3600.0
DATASET_MAX_ENTRIES = 2_000_000  # stop walking here; the size is then a lower bound
SHM_PATH = "/dev/shm"


@dataclass(frozen=True)
class CpuTimes:
    """Aggregate `cpu` line of /proc/stat, in clock ticks (guest time is inside user/nice)."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        return (
            self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
        )


def parse_proc_stat(text: str) -> tuple[CpuTimes, int]:
    """(aggregate CPU times, number of per-CPU lines). ValueError if there is no `cpu` line."""
    total: CpuTimes | None = None
    count = 0
    for line in text.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("cpu"):
            continue
        if parts[0] == "cpu":
            try:
                values = [int(v) for v in parts[1:9]]
            except ValueError:
                raise ValueError(f"bad cpu line in /proc/stat: {line!r}") from None
            values += [0] * (8 - len(values))  # old kernels lack steal
            if len(parts) < 5:
                raise ValueError(f"short cpu line in /proc/stat: {line!r}")
            total = CpuTimes(*values)
        elif parts[0][3:].isdigit():
            count += 1
    if total is None:
        raise ValueError("no cpu line in /proc/stat")
    return total, count


def cpu_percent(prev: CpuTimes, cur: CpuTimes) -> tuple[float, float]:
    """(busy %, iowait %) of all cores between two readings; (0, 0) when counters did not move
    forward (a counter that went down is treated as no time, never as negative time)."""
    deltas = [max(0, c - p) for p, c in zip(_fields(prev), _fields(cur), strict=True)]
    total = sum(deltas)
    if total <= 0:
        return 0.0, 0.0
    d = CpuTimes(*deltas)
    busy = total - d.idle - d.iowait
    return min(100.0, 100.0 * busy / total), min(100.0, 100.0 * d.iowait / total)


def _fields(t: CpuTimes) -> tuple[int, ...]:
    return (t.user, t.nice, t.system, t.idle, t.iowait, t.irq, t.softirq, t.steal)


MEMINFO_KEYS = frozenset({"MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "Shmem"})


def parse_meminfo(text: str, keys: frozenset[str] | None = None) -> dict[str, int]:
    """Values in kB by key ("MemTotal", "Cached", ...); malformed lines are skipped. With
    `keys`, parsing stops once all of them are found (Shmem is a third of the way down)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        key = key.strip()
        if keys is not None and key not in keys:
            continue
        parts = rest.split()
        if parts:
            try:
                out[key] = int(parts[0])
            except ValueError:
                continue
            if keys is not None and len(out) == len(keys):
                break
    return out


def memory_figures(meminfo: dict[str, int]) -> tuple[float, float, float]:
    """(page cache MB, total MB, available MB). Page cache is file-backed: Cached + Buffers
    minus Shmem (tmpfs and /dev/shm pages are counted in Cached but are no file cache)."""
    cached = meminfo.get("Cached", 0) + meminfo.get("Buffers", 0) - meminfo.get("Shmem", 0)
    return (
        max(0, cached) / 1024.0,
        meminfo.get("MemTotal", 0) / 1024.0,
        meminfo.get("MemAvailable", meminfo.get("MemFree", 0)) / 1024.0,
    )


def tree_size(paths: Sequence[str], max_entries: int = DATASET_MAX_ENTRIES) -> tuple[int, bool]:
    """(bytes in regular files under paths, complete?). Symlinks are not followed; each file
    counts once even when paths overlap or files are hard-linked.

    Memory stays flat for millions of files: only directories (few) and files with more than
    one link (rare) are remembered, not every file seen.
    """
    seen_dirs: set[tuple[int, int]] = set()
    seen_links: set[tuple[int, int]] = set()
    total = 0
    entries = 0
    stack: list[str] = []

    def count_file(st: os.stat_result, remember: bool = False) -> None:
        nonlocal total
        if remember or st.st_nlink > 1 or (st.st_dev, st.st_ino) in seen_links:
            key = (st.st_dev, st.st_ino)
            if key in seen_links:
                return
            seen_links.add(key)
        total += st.st_size

    for top in paths:  # the watched paths themselves may be symlinks (/workspace/data -> ...)
        real = os.path.realpath(top)
        if os.path.isdir(real):
            stack.append(real)
        elif os.path.isfile(real):
            count_file(os.stat(real), remember=True)  # a watched file may also be walked
    while stack:
        directory = stack.pop()
        try:
            st = os.stat(directory)
            if (st.st_dev, st.st_ino) in seen_dirs:
                continue  # reached again through an overlapping watched path
            seen_dirs.add((st.st_dev, st.st_ino))
            with os.scandir(directory) as it:
                for entry in it:
                    entries += 1
                    if entries > max_entries:
                        return total, False
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            count_file(entry.stat(follow_symlinks=False))
                    except OSError:
                        continue
        except OSError:
            continue
    return total, True


def shm_size_mb(path: str = SHM_PATH) -> float | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize / 2**20


class HostCollector:
    def __init__(
        self,
        data_paths: Sequence[str] = (),
        read: Callable[[str], str] | None = None,
        shm_path: str = SHM_PATH,
    ) -> None:
        self.data_paths = list(data_paths)
        files = {path: ProcFile(path) for path in ("/proc/stat", "/proc/meminfo")}
        self._read = read or (lambda path: files[path].read())
        self._shm_path = shm_path
        self._prev: CpuTimes | None = None
        self._count = os.cpu_count() or 0
        self._dataset_mb: float | None = None
        self._dataset_at = -DATASET_REFRESH_S
        self._walking = False
        self._lock = threading.Lock()

    def start(self) -> None:
        try:
            self._prev, count = parse_proc_stat(self._read("/proc/stat"))
            self._count = count or self._count
        except (OSError, ValueError):
            self._prev = None
        self._maybe_measure_dataset()

    def _maybe_measure_dataset(self) -> None:
        if not self.data_paths or self._walking:
            return
        if time.monotonic() - self._dataset_at < DATASET_REFRESH_S:
            return
        self._walking = True
        threading.Thread(target=self._measure, name="diskinfo-dataset", daemon=True).start()

    def _measure(self) -> None:
        # the walk is background work: on Linux a thread's nice value is its own, so the
        # training job's threads keep priority over it
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            size, _complete = tree_size(self.data_paths)
            with self._lock:
                self._dataset_mb = size / 2**20
        finally:
            self._dataset_at = time.monotonic()
            self._walking = False

    def fill(self, record: IntervalRecord) -> None:
        fig = HostFigures(cpu_count=self._count)
        try:
            cur, count = parse_proc_stat(self._read("/proc/stat"))
            fig.cpu_count = count or self._count
            if self._prev is not None:
                fig.cpu_busy, fig.cpu_iowait = cpu_percent(self._prev, cur)
            self._prev = cur
        except (OSError, ValueError) as exc:
            record.warnings.append(f"host: /proc/stat: {exc}")
        try:
            cache, total, available = memory_figures(
                parse_meminfo(self._read("/proc/meminfo"), MEMINFO_KEYS)
            )
            fig.page_cache_mb, fig.mem_total_mb, fig.mem_available_mb = cache, total, available
        except OSError as exc:
            record.warnings.append(f"host: /proc/meminfo: {exc}")
        with self._lock:
            fig.dataset_mb = self._dataset_mb
        fig.shm_total_mb = shm_size_mb(self._shm_path)
        record.cpu = fig
        self._maybe_measure_dataset()

    def stop(self) -> None:
        pass
