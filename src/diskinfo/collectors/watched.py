"""The watched paths and what they resolve to, shared by the collectors that need them.

`diskinfo watch` builds one `WatchedPaths`, resolves it once (a path that does not exist is
a UserError there), and hands it to the disk, NFS, cgroup and host collectors. Only the disk
collector resolves again, when a device vanished from /proc/diskstats; every other collector
then sees the same device map, whatever the order the monitor runs them in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from diskinfo.errors import UserError
from diskinfo.resolve import Resolution, Resolver


class WatchedPaths:
    def __init__(
        self, paths: Sequence[str], resolver: Callable[[], Resolver] = Resolver.live
    ) -> None:
        self.paths = list(paths)
        self._resolver = resolver
        self.resolutions: list[Resolution] = []
        self.devices: dict[str, list[str]] = {}  # kernel name -> watched paths on it
        self.resolved = False

    @classmethod
    def of_devices(cls, names: Iterable[str]) -> WatchedPaths:
        """A fixed device set, no paths to resolve (API callers and tests)."""
        watched = cls([])
        watched.devices = {name: [] for name in names}
        watched.resolved = True
        return watched

    def resolve(self, strict: bool = False) -> list[str]:
        """Resolve every path again; the warnings for those that failed. `strict`: the first
        failure is raised (UserError, exit 2 for a missing path) instead.

        A resolution that finds no device at all keeps the previous device map: a device
        that vanished for a moment is looked for again rather than forgotten.
        """
        self.resolved = True
        try:
            resolver = self._resolver()
        except UserError as exc:
            if strict:
                raise
            return [str(exc)]
        warnings: list[str] = []
        resolutions: list[Resolution] = []
        devices: dict[str, list[str]] = {}
        for path in self.paths:
            try:
                res = resolver.resolve(path)
            except UserError as exc:
                if strict:
                    raise
                warnings.append(f"{path}: {exc}")
                continue
            resolutions.append(res)
            for name in res.watch_devices:
                devices.setdefault(name, []).append(path)
        self.resolutions = resolutions
        if devices or not self.devices:
            self.devices = devices
        return warnings

    def nfs_mountpoints(self) -> list[str]:
        """Mount points of the watched paths on NFS, as last resolved."""
        return [r.mount.mountpoint for r in self.resolutions if r.kind == "nfs"]
