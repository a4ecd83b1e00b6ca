"""/proc/self/mountinfo: the mounts this process sees, with each one's major:minor.

Format (proc(5)): `id parent major:minor root mountpoint options [optional...] - fstype
source superoptions`. Paths escape space, tab, newline and backslash as octal (\\040 ...).
Inside a container this is the container's view, unlike psutil.disk_partitions().
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from diskinfo.sources import ParseError

PATH = "/proc/self/mountinfo"

_OCTAL = re.compile(r"\\([0-7]{3})")
_ESCAPE = {" ": "\\040", "\t": "\\011", "\n": "\\012", "\\": "\\134"}


def unescape(text: str) -> str:
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


def escape(text: str) -> str:
    return "".join(_ESCAPE.get(ch, ch) for ch in text)


@dataclass(frozen=True)
class Mount:
    mount_id: int
    parent_id: int
    major: int
    minor: int
    root: str  # the path inside the mounted filesystem that is mounted here (bind mounts)
    mountpoint: str
    options: str
    optional: tuple[str, ...]
    fstype: str
    source: str
    super_options: str

    @property
    def devno(self) -> str:
        return f"{self.major}:{self.minor}"

    def super_option(self, key: str) -> str | None:
        """Value of `key=value` in the superblock options (e.g. overlay's upperdir)."""
        for item in self.super_options.split(","):
            name, _, value = item.partition("=")
            if name == key:
                return value
        return None

    def to_line(self) -> str:
        fields = [
            str(self.mount_id),
            str(self.parent_id),
            self.devno,
            escape(self.root),
            escape(self.mountpoint),
            self.options,
            *self.optional,
            "-",
            self.fstype,
            escape(self.source),
            self.super_options,
        ]
        return " ".join(fields)


def parse_line(line: str) -> Mount:
    parts = line.split(" ")
    try:
        sep = parts.index("-", 6)
    except ValueError:
        raise ParseError(f"mountinfo: no ' - ' separator in {line!r}") from None
    if len(parts) - sep != 4:
        raise ParseError(f"mountinfo: expected 3 fields after ' - ' in {line!r}")
    try:
        mount_id, parent_id = int(parts[0]), int(parts[1])
        major_s, colon, minor_s = parts[2].partition(":")
        if not colon:
            raise ValueError
        major, minor = int(major_s), int(minor_s)
    except ValueError:
        raise ParseError(f"mountinfo: bad id or major:minor in {line!r}") from None
    if min(mount_id, parent_id, major, minor) < 0:
        raise ParseError(f"mountinfo: negative number in {line!r}")
    root, mountpoint = unescape(parts[3]), unescape(parts[4])
    if not mountpoint.startswith("/"):
        raise ParseError(f"mountinfo: mount point is not absolute in {line!r}")
    return Mount(
        mount_id=mount_id,
        parent_id=parent_id,
        major=major,
        minor=minor,
        root=root,
        mountpoint=mountpoint,
        options=parts[5],
        optional=tuple(parts[6:sep]),
        fstype=parts[sep + 1],
        source=unescape(parts[sep + 2]),
        super_options=parts[sep + 3],
    )


def parse(text: str) -> tuple[list[Mount], list[str]]:
    """Mounts in file order (later entries are stacked over earlier ones), plus errors."""
    mounts: list[Mount] = []
    errors: list[str] = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        try:
            mounts.append(parse_line(line))
        except ParseError as exc:
            errors.append(str(exc))
    return mounts, errors


def is_under(path: str, mountpoint: str) -> bool:
    """True if `path` is `mountpoint` or below it, on path-component boundaries.

    "/data2" is not under "/data"; everything is under "/".
    """
    if mountpoint == "/":
        return path.startswith("/")
    return path == mountpoint or path.startswith(mountpoint.rstrip("/") + "/")


def mount_for(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount that serves an absolute, symlink-free path: the longest mount point that
    contains it on component boundaries; among mounts stacked on the same point, the last."""
    best: Mount | None = None
    for mount in mounts:
        if is_under(path, mount.mountpoint) and (
            best is None or len(mount.mountpoint) >= len(best.mountpoint)
        ):
            best = mount
    return best


def read(path: str = PATH) -> str:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return f.read()
