"""A cgroup-v1 group in cpu, cpuacct and blkio standing in for a container (root only).

On this shared machine other people's jobs load the CPU and the disk: a monitor and its
training command in their own group judge their own figures, as in a real container.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("cpu", "cpuacct", "blkio")
HOG = (  # a busy loop on every core
    "import os\nfor _ in range(os.cpu_count() - 1):\n    if os.fork() == 0: break\n"
    "while True: pass\n"
)


def available() -> bool:
    return os.geteuid() == 0 and all((ROOT / c / "cgroup.procs").exists() for c in CONTROLLERS)


@contextlib.contextmanager
def group(name: str) -> Iterator[dict[str, Path]]:
    """The group's directory per controller; its processes go back to the root at the end."""
    dirs = {c: ROOT / c / name for c in CONTROLLERS}
    for d in dirs.values():
        d.mkdir(exist_ok=True)
    try:
        yield dirs
    finally:
        for d in dirs.values():
            for pid in (d / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (d.parent / "cgroup.procs").write_text(pid)
            with contextlib.suppress(OSError):
                d.rmdir()


def enter(dirs: dict[str, Path] | None) -> str:
    """A shell prefix that moves the shell into the group before it execs the command."""
    return "".join(f"echo $$ > {d / 'cgroup.procs'}; " for d in (dirs or {}).values())
