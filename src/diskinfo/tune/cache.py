"""Make a dataset cold without making the code cold.

drop_caches=3 drops the page cache, dentries and inodes; the files the given processes have
mapped (python, torch's shared libraries) are then read back, so the storage reads that
follow are the data's, not code pages faulting back in. Needs root: root itself, or the
root helper `diskinfo tune` kept when it gave up root (`privileges.CacheDropper`), so that the
user's code never runs as root.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from diskinfo.privileges import CacheDropper

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def can_drop() -> bool:
    return CacheDropper.running is not None or (
        os.geteuid() == 0 and os.access(DROP_CACHES, os.W_OK)
    )


def mapped_files(pids: Iterable[int]) -> set[str]:
    """Regular files mapped into the processes (their code and libraries)."""
    mapped: set[str] = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    mapped.add(parts[5])
    return mapped


def make_cold(pids: Iterable[int], data: Path | None = None) -> None:
    """Drop every cache, then re-read what `pids` map, except files under `data` and files
    that are not code (a mapped dataset, say numpy memmaps, stays cold)."""
    if CacheDropper.running is not None:
        CacheDropper.running.drop()
    else:
        os.sync()
        DROP_CACHES.write_text("3\n")
    for name in sorted(mapped_files(pids)):
        path = Path(name)
        if data is not None and path.is_relative_to(data):
            continue
        if data is None and not _is_code(path):
            continue
        if path.is_file():
            with contextlib.suppress(OSError), open(path, "rb") as fh:
                while fh.read(1 << 20):
                    pass


def _is_code(path: Path) -> bool:
    name = path.name
    return ".so" in name or name.startswith(("python", "ld-")) or "/bin/" in str(path)
