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
def loop_device(backing: str, size_mb: int, *options: str) -> Iterator[str]:
    """A loop device on a new sparse file; `options` go to losetup (`--direct-io=on`: the
    loop's reads reach the backing disk instead of the page cache)."""
    with open(backing, "wb") as f:
        f.truncate(size_mb * 2**20)
    dev = subprocess.run(
        ["losetup", "--find", "--show", *options, backing],
        check=True,
        capture_output=True,
        text=True,
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
def ext4_loop(directory: Path, size_mb: int = 256, *options: str) -> Iterator[tuple[Path, str]]:
    """A fresh ext4 on its own loop device, mounted at directory/mnt: only the test's I/O
    lands on it. Yields (mount point, kernel device name); `options` as for loop_device."""
    with loop_device(str(directory / "disk.img"), size_mb, *options) as dev:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
        with mounted(dev, str(directory / "mnt")) as mnt:
            yield Path(mnt), Path(dev).name


class Blkio:
    """A cgroup-v1 blkio group for the reader: the kernel counts the I/O it issues to the
    dataset's device (separating it from the rest of a shared machine), and can cap its IOPS."""

    ROOT = Path("/sys/fs/cgroup/blkio")

    def __init__(self, name: str, devno: str, read_iops: int = 0) -> None:
        self.path, self.devno = self.ROOT / name, devno
        self.path.mkdir(exist_ok=True)
        if read_iops:
            (self.path / "blkio.throttle.read_iops_device").write_text(f"{devno} {read_iops}\n")

    @classmethod
    def make(cls, name: str, resolved: dict, read_iops: int = 0) -> Blkio | None:
        devno = (resolved.get("device") or {}).get("devno")
        if not devno or not (cls.ROOT / "cgroup.procs").exists():
            if read_iops:
                raise SystemExit("bench_shards: --iops-limit needs cgroup v1 blkio")
            return None
        return cls(name, devno, read_iops)

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def _read(self, name: str, unit: str) -> int:
        from diskinfo.sources.cgroup import parse_v1_stat

        stats = parse_v1_stat((self.path / name).read_text(), unit)
        return stats.get(self.devno, {}).get(f"read_{unit}", 0)

    def reads(self) -> tuple[int, int]:
        """(read I/Os, bytes) issued by the group to the device so far (bios, before merging)."""
        return self._read("blkio.throttle.io_serviced", "ios"), self._read(
            "blkio.throttle.io_service_bytes", "bytes"
        )

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


@contextlib.contextmanager
def data_and_logs(directory: Path, data_mb: int) -> Iterator[tuple[Path, str, Path]]:
    """For a container of the image: an ext4 loop (`ext4_loop`, 64 MiB) holding `data.bin`,
    `data_mb` MiB of random bytes, and an empty logs directory the unprivileged monitor can
    write. Yields (mount point, kernel device name, logs directory)."""
    with ext4_loop(directory, 64) as (mnt, dev):
        subprocess.run(
            [
                "dd",
                "if=/dev/urandom",
                f"of={mnt}/data.bin",
                "bs=1M",
                f"count={data_mb}",
                "conv=fsync",
            ],
            check=True,
            capture_output=True,
        )
        logs = directory / "logs"
        logs.mkdir()
        os.chmod(logs, 0o777)  # the monitor runs as the unprivileged user
        yield mnt, dev, logs


class ReadCap:
    """A cgroup whose processes' reads on one device are capped at `read_iops`: cgroup v1's
    blkio where it is mounted (as on this machine), else cgroup v2's io.max (a Debian 12 host's
    default). A loop device charges its reads to the reader's group, so a cap on the device
    under a loop makes each read of the loop wait, as on a disk at its IOPS limit."""

    V2 = Path("/sys/fs/cgroup")

    def __init__(self, name: str, devno: str, read_iops: int) -> None:
        if (Blkio.ROOT / "cgroup.procs").exists():
            self.path = Blkio(name, devno, read_iops).path
            return
        subtree = self.V2 / "cgroup.subtree_control"
        if "io" not in subtree.read_text().split():
            subtree.write_text("+io\n")
        self.path = self.V2 / name
        self.path.mkdir(exist_ok=True)
        (self.path / "io.max").write_text(f"{devno} riops={read_iops}\n")

    @classmethod
    def available(cls) -> bool:
        if os.geteuid() != 0:
            return False
        if (Blkio.ROOT / "cgroup.procs").exists():
            return True
        controllers = cls.V2 / "cgroup.controllers"
        return controllers.exists() and "io" in controllers.read_text().split()

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def remove(self) -> None:
        """Back to the parent group with any process left, then gone."""
        with contextlib.suppress(OSError):
            for pid in (self.path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (self.path.parent / "cgroup.procs").write_text(pid)
        with contextlib.suppress(OSError):
            self.path.rmdir()
