"""Host figures: CPU busy and iowait from /proc/stat deltas, the container's own cgroup CPU,
page cache vs. dataset size, /dev/shm.

Parsers take the file's text; only `HostCollector` opens files. The dataset size is measured
once in a background thread (a walk over millions of files must not delay a sample) and
refreshed every `DATASET_REFRESH_S` (datasets rarely change during a run; a walk over a
million files costs seconds of CPU, so refreshing it often would dominate the monitor's cost).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Callable, Sequence

from diskinfo.cores import allowed_cores, cpuset_cores, own_cpu_location
from diskinfo.record import HostFigures, IntervalRecord
from diskinfo.sources import ParseError, shm
from diskinfo.sources.cgroup_cpu import (
    CpuLocation,
    CpuSample,
    read_quota,
    read_sample,
)
from diskinfo.sources.meminfo import MEMINFO_KEYS, memory_figures, parse_meminfo
from diskinfo.sources.procfile import ProcFile
from diskinfo.sources.procstat import CpuTimes, cpu_percent, parse_proc_stat

DATASET_REFRESH_S = 3600.0
DATASET_MAX_ENTRIES = 2_000_000  # stop walking here; the size is then a lower bound
# the cgroup's CPU quota, this process's cpuset and /dev/shm's size change rarely (docker
# update, a remount): read this often, not every sample, where each read is a system call
SETTINGS_S = 10.0


def tree_size(paths: Sequence[str], max_entries: int = DATASET_MAX_ENTRIES) -> tuple[int, bool]:
    """(bytes in regular files under paths, complete?). Links are followed, as ImageFolder
    and `diskinfo pack` follow them (a dataset assembled from linked class directories, a
    Hugging Face snapshot whose files are links into blobs/): each directory is walked once
    however it is reached, so a link back up ends there, and a linked file counts once, and
    not at all where the walk reaches its directory (a split of links into a pool that is
    walked too). Each file counts once even when paths overlap or files are hard-linked.

    Memory stays flat for millions of files: only directories (few), files with more than
    one link (rare) and link targets are remembered, not every file seen.
    """
    seen_dirs: set[tuple[int, int]] = set()
    seen_links: set[tuple[int, int]] = set()
    linked: dict[tuple[int, int], tuple[int, str]] = {}  # a file link's target: size, directory
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
                        if entry.is_dir():  # through a link too: os.stat above dedupes
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            count_file(entry.stat(follow_symlinks=False))
                        elif entry.is_symlink():
                            target = os.path.realpath(entry.path)
                            st = os.stat(target)
                            if stat.S_ISREG(st.st_mode):
                                key = (st.st_dev, st.st_ino)
                                linked[key] = (st.st_size, os.path.dirname(target))
                    except OSError:
                        continue
        except OSError:
            continue
    for key, (size, directory) in linked.items():  # once the walk knows what it walked
        try:
            st = os.stat(directory)
        except OSError:
            continue
        if key not in seen_links and (st.st_dev, st.st_ino) not in seen_dirs:
            total += size
    return total, True


def cgroup_figures(
    fig: HostFigures, prev: CpuSample, cur: CpuSample, elapsed: float, path: str, cpuset: int
) -> None:
    """Fill the cgroup CPU figures of `fig` from two samples `elapsed` seconds apart."""
    if elapsed <= 0:
        return
    cores = max(0.0, cur.usage_s - prev.usage_s) / elapsed
    allowed = allowed_cores(cur.quota_cores, cpuset, fig.cpu_count)
    periods = cur.periods - prev.periods
    fig.cgroup_cpu_cores = cores
    fig.cgroup_cpu_allowed = allowed
    fig.cgroup_cpu_busy = min(100.0, 100.0 * cores / allowed) if allowed > 0 else None
    fig.cgroup_cpu_quota = cur.quota_cores
    fig.cgroup_cpu_throttled = (  # periods are counted only under a quota, in both samples
        max(0, cur.throttled - prev.throttled) / periods
        if periods > 0 and prev.quota_cores is not None
        else None
    )
    fig.cgroup_path = path


class HostCollector:
    def __init__(
        self,
        data_paths: Sequence[str] = (),
        read: Callable[[str], str] | None = None,
        shm_path: str = shm.PATH,
        cpu_location: Callable[[], CpuLocation | None] | None = own_cpu_location,
        clock: Callable[[], float] = time.monotonic,
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
        self._cpu_location = cpu_location
        self._where: CpuLocation | None = None
        self._cg_prev: tuple[float, CpuSample] | None = None
        self._clock = clock
        self._cg_error: str | None = None
        self._settings_at = float("-inf")
        self._quota: float | None = None
        self._cpuset = 0
        self._shm_mb: float | None = None

    def _read_settings(self) -> None:
        """Quota, cpuset and /dev/shm's size: every SETTINGS_S."""
        now = self._clock()
        if now - self._settings_at < SETTINGS_S:
            return
        self._settings_at = now
        self._cpuset = cpuset_cores(self._count)
        self._shm_mb = shm.size_mb(self._shm_path)
        if self._where is not None:
            try:
                self._quota = read_quota(self._where)
            except (OSError, ParseError) as exc:
                self._cg_error = f"host: cgroup CPU quota ({self._where.quota_dir}): {exc}"

    def _cgroup_sample(self) -> tuple[float, CpuSample] | None:
        if self._where is None:
            return None
        try:
            return self._clock(), read_sample(self._where, self._quota)
        except (OSError, ParseError) as exc:
            self._cg_error = f"host: cgroup CPU ({self._where.usage_dir}): {exc}"
            return None

    def start(self) -> None:
        if self._cpu_location is not None:
            try:
                self._where = self._cpu_location()
            except (OSError, ParseError):
                self._where = None
        self._read_settings()
        self._cg_prev = self._cgroup_sample()
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
        self._read_settings()
        fig.shm_total_mb = self._shm_mb
        cur = self._cgroup_sample()
        if cur is not None and self._cg_prev is not None and self._where is not None:
            cgroup_figures(
                fig,
                self._cg_prev[1],
                cur[1],
                cur[0] - self._cg_prev[0],
                self._where.path,
                self._cpuset,
            )
        if self._cg_error is not None:
            record.warnings.append(self._cg_error)  # said once: the location is dropped
            self._where, self._cg_error, cur = None, None, None
        self._cg_prev = cur
        record.cpu = fig
        self._maybe_measure_dataset()

    def stop(self) -> None:
        pass
