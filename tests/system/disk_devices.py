"""Real loop devices for the system tests (root only); each is detached and its file removed."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

NEEDS_ROOT = os.geteuid() != 0 or shutil.which("losetup") is None


@contextlib.contextmanager
def loop_device(backing: str, size_mb: int) -> Iterator[str]:
    with open(backing, "wb") as f:
        f.truncate(size_mb * 2**20)
    dev = subprocess.run(
        ["losetup", "--find", "--show", backing], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)
        with contextlib.suppress(OSError):
            os.remove(backing)


@contextlib.contextmanager
def mounted(source: str, target: str, *opts: str) -> Iterator[str]:
    os.makedirs(target, exist_ok=True)
    subprocess.run(["mount", *opts, source, target], check=True, capture_output=True)
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", target], check=False)


@contextlib.contextmanager
def ext4_loop(directory: Path, size_mb: int = 256) -> Iterator[tuple[Path, str]]:
    """A fresh ext4 on its own loop device, mounted at directory/mnt: only the test's I/O
    lands on it. Yields (mount point, kernel device name)."""
    with loop_device(str(directory / "disk.img"), size_mb) as dev:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
        with mounted(dev, str(directory / "mnt")) as mnt:
            yield Path(mnt), Path(dev).name
