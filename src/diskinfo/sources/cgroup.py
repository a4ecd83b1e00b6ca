"""The process's own cgroup: its block I/O counters, its throttle limits and its I/O pressure.

Inside a container /proc/diskstats shows the whole device, shared with the host and other
containers; a container throttled by its cgroup (v1 `blkio.throttle.*_device`, v2 `io.max`)
starves while that device looks idle. Only the cgroup's own files tell. Formats
(Documentation/admin-guide/cgroup-v2.rst, cgroup-v1/blkio-controller.rst):

- /proc/self/cgroup: `ID:controllers:path` (v1, e.g. `7:blkio:/docker/ab12`), `0::/path` (v2)
- v2 io.stat: `8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0`
- v2 io.max: `8:16 rbps=2097152 wbps=max riops=max wiops=120`
- v2 io.pressure (PSI): `some avg10=0.00 avg60=0.00 avg300=0.00 total=0`, then `full ...`
- v1 blkio.throttle.io_service_bytes / io_serviced: `8:0 Read 1024` ... `8:0 Total 2048`,
  then a last line `Total 2048`
- v1 blkio.throttle.read_bps_device (write_bps, read_iops, write_iops): `8:0 1000`

Every parser takes the file's text and raises only ParseError; `locate` turns
/proc/self/cgroup and /proc/self/mountinfo into the directories, `read` opens files.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Collection
from dataclasses import dataclass

from diskinfo.sources import ParseError, line_after
from diskinfo.sources.mountinfo import Mount

PROC_CGROUP = "/proc/self/cgroup"

# counter keys (CgroupIO.counters) from v2 io.stat keys and v1 operation names
V2_KEYS = {
    "rbytes": "read_bytes",
    "wbytes": "write_bytes",
    "rios": "read_ios",
    "wios": "write_ios",
    "dbytes": "discard_bytes",
    "dios": "discard_ios",
}
V1_OPS = {"Read": "read", "Write": "write", "Discard": "discard"}
LIMIT_KEYS = ("read_bps", "write_bps", "read_iops", "write_iops")
V2_LIMITS = {"rbps": "read_bps", "wbps": "write_bps", "riops": "read_iops", "wiops": "write_iops"}
V1_LIMIT_FILES = {
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
}


@dataclass(frozen=True)
class Membership:
    """One line of /proc/self/cgroup."""

    hierarchy: int
    controllers: tuple[str, ...]  # () for the v2 line
    path: str

    @property
    def v2(self) -> bool:
        return self.hierarchy == 0 and not self.controllers


@dataclass(frozen=True)
class Location:
    """A cgroup directory to read, and how it was found."""

    version: int  # 1 (blkio controller) or 2 (unified)
    directory: str  # absolute, under the controller's mount point
    path: str  # the cgroup path from /proc/self/cgroup


def _devno(text: str, what: str, line: str) -> str:
    major, colon, minor = text.partition(":")
    if not colon or not major.isdigit() or not minor.isdigit():
        raise ParseError(f"{what}: bad major:minor in {line!r}")
    return f"{int(major)}:{int(minor)}"


def _count(text: str, what: str, line: str) -> int:
    if not text.isdigit() or not text.isascii():
        raise ParseError(f"{what}: bad number in {line!r}")
    return int(text)


def parse_proc_cgroup(text: str) -> list[Membership]:
    out = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        ident, colon1, rest = line.partition(":")
        controllers, colon2, path = rest.partition(":")
        if not colon1 or not colon2:
            raise ParseError(f"cgroup: expected ID:controllers:path in {line!r}")
        hierarchy = _count(ident, "cgroup", line)
        if not path.startswith("/"):
            raise ParseError(f"cgroup: path is not absolute in {line!r}")
        names = tuple(c for c in controllers.split(",") if c)
        out.append(Membership(hierarchy, names, path.removesuffix(" (deleted)")))
    return out


def parse_io_stat(text: str, devnos: Collection[str] | None = None) -> dict[str, dict[str, int]]:
    """v2 io.stat -> {majmin: {counter key: value}}; keys other than V2_KEYS (iocost, iolatency
    debug figures, some not integers) are skipped, and with `devnos` other devices' lines."""
    out: dict[str, dict[str, int]] = {}
    watched = _prefixes(devnos)
    for line in text.split("\n"):
        if watched is not None and not line.startswith(watched):
            continue  # another device's line, skipped unparsed (the per-sample budget)
        parts = line.split()
        if not parts:
            continue
        devno = _devno(parts[0], "io.stat", line)
        values: dict[str, int] = {}
        for token in parts[1:]:
            key, eq, value = token.partition("=")
            if not eq:
                raise ParseError(f"io.stat: expected key=value, got {token!r} in {line!r}")
            if key in V2_KEYS:
                values[V2_KEYS[key]] = _count(value, "io.stat", line)
        out[devno] = values
    return out


def parse_io_max(text: str) -> dict[str, dict[str, int | None]]:
    """v2 io.max -> {majmin: {limit key: value or None for `max`}}."""
    out: dict[str, dict[str, int | None]] = {}
    for line in text.split("\n"):
        parts = line.split()
        if not parts:
            continue
        devno = _devno(parts[0], "io.max", line)
        limits: dict[str, int | None] = dict.fromkeys(LIMIT_KEYS)
        for token in parts[1:]:
            key, eq, value = token.partition("=")
            if not eq or key not in V2_LIMITS:
                raise ParseError(f"io.max: unexpected {token!r} in {line!r}")
            limits[V2_LIMITS[key]] = None if value == "max" else _count(value, "io.max", line)
        out[devno] = limits
    return out


def pressure_avg10(text: str) -> dict[str, float]:
    """Only `some_avg10` and `full_avg10` of a PSI file, looked up by `line_after` (what the
    monitor uses, every sample); a bad value is a ParseError as in `parse_pressure`."""
    out: dict[str, float] = {}
    for kind in ("some", "full"):
        line = line_after(text, f"{kind} ") or ""
        value = next((tok[6:] for tok in line.split() if tok.startswith("avg10=")), None)
        if value is None:
            continue
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not 0 <= number < float("inf"):
            raise ParseError(f"pressure: bad avg10={value!r} in {kind} {line!r}")
        out[f"{kind}_avg10"] = number
    return out


def parse_pressure(text: str) -> dict[str, float]:
    """PSI -> {"some_avg10": .., "some_total": .., "full_avg10": .., ...} (percent, us).

    Lines of a kind other than some/full are skipped unread, as a kernel may add kinds: one
    new line must not cost the sample. A bad value on a some/full line is a ParseError."""
    out: dict[str, float] = {}
    for line in text.split("\n"):
        parts = line.split()
        if not parts or parts[0] not in ("some", "full"):
            continue
        for token in parts[1:]:
            key, eq, value = token.partition("=")
            try:
                number = float(value) if eq else -1.0
            except ValueError:
                number = -1.0
            if not eq or not key or number < 0 or number != number or number == float("inf"):
                raise ParseError(f"pressure: bad {token!r} in {line!r}")
            out[f"{parts[0]}_{key}"] = number
    return out


def parse_v1_stat(
    text: str, unit: str, devnos: Collection[str] | None = None
) -> dict[str, dict[str, int]]:
    """v1 blkio.throttle.io_service_bytes / io_serviced -> {majmin: {read_<unit>: ..}}; `unit`
    is "bytes" or "ios". Sync/Async/Total and the closing `Total N` line are not kept. With
    `devnos`, only those devices' lines are looked up (`_v1_watched`): the root cgroup lists
    every device of the host, six lines each, and this runs every sample."""
    if devnos is not None:
        return _v1_watched(text, unit, devnos)
    out: dict[str, dict[str, int]] = {}
    keys = {op: f"{name}_{unit}" for op, name in V1_OPS.items()}
    for line in text.split("\n"):
        parts = line.split()
        if not parts:
            continue
        if len(parts) == 2 and parts[0] == "Total":
            _count(parts[1], "blkio", line)
            continue
        if len(parts) != 3:
            raise ParseError(f"blkio: expected 'MAJ:MIN Op N' in {line!r}")
        devno = _devno(parts[0], "blkio", line)
        values = out.setdefault(devno, {})
        key = keys.get(parts[1])
        if key is not None:
            values[key] = _count(parts[2], "blkio", line)
        elif parts[1] not in ("Sync", "Async", "Total"):
            raise ParseError(f"blkio: unknown operation in {line!r}")
    return out


def _v1_watched(text: str, unit: str, devnos: Collection[str]) -> dict[str, dict[str, int]]:
    """Each watched device's Read, Write and Discard lines, found by `line_after`; the rest of
    the file is never split."""
    out: dict[str, dict[str, int]] = {}
    for devno in devnos:
        values: dict[str, int] = {}
        for op, name in V1_OPS.items():
            number = line_after(text, f"{devno} {op} ")
            if number is not None:
                values[f"{name}_{unit}"] = _count(number.strip(), "blkio", f"{devno} {op} {number}")
        if values:
            out[devno] = values
    return out


def _prefixes(devnos: Collection[str] | None) -> tuple[str, ...] | None:
    """Line starts of the given devices ("8:0 "), for str.startswith."""
    return None if devnos is None else tuple(f"{d} " for d in devnos)


def parse_v1_limit(text: str) -> dict[str, int]:
    """v1 blkio.throttle.*_device -> {majmin: limit}; 0 (no rule) is left out."""
    out: dict[str, int] = {}
    for line in text.split("\n"):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise ParseError(f"blkio: expected 'MAJ:MIN value' in {line!r}")
        value = _count(parts[1], "blkio", line)
        if value:
            out[_devno(parts[0], "blkio", line)] = value
    return out


def _join(mount: Mount, path: str) -> str:
    """The directory of cgroup `path` under a controller mounted with `mount.root` (a
    container's view: root `/docker/ID` and path `/docker/ID`, or both `/` with a private
    cgroup namespace). A path outside the mount's root: the mount point itself."""
    root = mount.root.rstrip("/") or "/"
    rel = posixpath.relpath(path, root) if path.startswith(root) else "."
    if rel.startswith(".."):
        rel = "."
    return posixpath.normpath(posixpath.join(mount.mountpoint, rel))


def v1_mount(mounts: list[Mount], controller: str) -> Mount | None:
    """The (last) cgroup v1 hierarchy that carries `controller`."""
    return next(
        (
            m
            for m in reversed(mounts)
            if m.fstype == "cgroup" and controller in m.super_options.split(",")
        ),
        None,
    )


def v2_mount(mounts: list[Mount]) -> Mount | None:
    return next((m for m in reversed(mounts) if m.fstype == "cgroup2"), None)


def locate(memberships: list[Membership], mounts: list[Mount]) -> list[Location]:
    """The v2 directory first (if there is a cgroup2 mount), then the v1 blkio directory."""
    out = []
    v2 = next((m for m in memberships if m.v2), None)
    blkio = next((m for m in memberships if "blkio" in m.controllers), None)
    if v2 is not None:
        mount = v2_mount(mounts)
        if mount is not None:
            out.append(Location(2, _join(mount, v2.path), v2.path))
    if blkio is not None:
        mount = v1_mount(mounts, "blkio")
        if mount is not None:
            out.append(Location(1, _join(mount, blkio.path), blkio.path))
    return out


def read(path: str) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()


def exists(directory: str, name: str) -> bool:
    return os.path.exists(os.path.join(directory, name))
