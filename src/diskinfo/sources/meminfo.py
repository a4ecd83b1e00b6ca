"""/proc/meminfo: memory, page cache and shared memory, in kB."""

from __future__ import annotations

from diskinfo.sources import line_after

MEMINFO_KEYS = frozenset({"MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "Shmem"})


def parse_meminfo(text: str, keys: frozenset[str] | None = None) -> dict[str, int]:
    """Values in kB by key ("MemTotal", "Cached", ...); malformed lines are skipped. With
    `keys`, only their lines are looked up (str.find: the monitor does this every sample)."""
    if keys is not None:
        return _lookup(text, keys)
    out: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts:
            try:
                out[key.strip()] = int(parts[0])
            except ValueError:
                continue
    return out


def _lookup(text: str, keys: frozenset[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for key in keys:
        parts = (line_after(text, f"{key}:") or "").split()
        if parts:
            try:
                out[key] = int(parts[0])
            except ValueError:
                continue
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
