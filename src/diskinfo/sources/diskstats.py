"""/proc/diskstats: one snapshot of every block device's cumulative counters.

Field layout (Documentation/admin-guide/iostats.rst): 3 identity fields, then 11 counters
(all kernels since 2.6), 4 discard counters (4.18+) and 2 flush counters (5.5+). Sectors are
always 512 bytes whatever the device's block size (units.SECTOR_BYTES). Counts are
`unsigned long`, times (ms) are `unsigned int` in the kernel, so both can wrap;
collectors/rates.py deals with that.

Any line of 14 or more fields is read, as sysstat's `read_diskstats_stat` and
prometheus/procfs do: the fields known here are taken, a group only when all of it is
there (discard needs 18 fields, flush 20), and counters a newer kernel appends are
ignored, so a kernel that adds a column does not blind the monitor.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from diskinfo.sources import ParseError

PATH = "/proc/diskstats"

# counter names in kernel order; the first 11 are always there
BASE_FIELDS = (
    "rd_ios",
    "rd_merges",
    "rd_sectors",
    "rd_ticks",
    "wr_ios",
    "wr_merges",
    "wr_sectors",
    "wr_ticks",
    "in_flight",
    "io_ticks",
    "rq_ticks",
)
DISCARD_FIELDS = ("dc_ios", "dc_merges", "dc_sectors", "dc_ticks")
FLUSH_FIELDS = ("fl_ios", "fl_ticks")
ALL_FIELDS = BASE_FIELDS + DISCARD_FIELDS + FLUSH_FIELDS
# times in ms, `unsigned int` in the kernel: they wrap at 2**32
TIME_FIELDS = frozenset({"rd_ticks", "wr_ticks", "io_ticks", "rq_ticks", "dc_ticks", "fl_ticks"})


class DiskCounters(NamedTuple):
    """One line of /proc/diskstats. Discard and flush counters are None on older kernels.

    A named tuple, not a frozen dataclass: immutable all the same, and built in a fraction of
    the time (the monitor builds one per watched device every sample)."""

    major: int
    minor: int
    name: str
    rd_ios: int
    rd_merges: int
    rd_sectors: int
    rd_ticks: int
    wr_ios: int
    wr_merges: int
    wr_sectors: int
    wr_ticks: int
    in_flight: int
    io_ticks: int
    rq_ticks: int
    dc_ios: int | None = None
    dc_merges: int | None = None
    dc_sectors: int | None = None
    dc_ticks: int | None = None
    fl_ios: int | None = None
    fl_ticks: int | None = None

    @property
    def devno(self) -> str:
        return f"{self.major}:{self.minor}"

    @property
    def has_discard(self) -> bool:
        return self.dc_ios is not None

    @property
    def has_flush(self) -> bool:
        return self.fl_ios is not None

    @property
    def reported(self) -> int:
        """How many of ALL_FIELDS the kernel reported: 11, 15 (discard) or 17 (flush too);
        groups come whole, so the missing ones are the last."""
        return 17 if self.fl_ios is not None else 15 if self.dc_ios is not None else 11

    def to_line(self) -> str:
        """The /proc/diskstats line for these counters (the kernel's own format)."""
        values = [getattr(self, name) for name in ALL_FIELDS]
        counters = " ".join(str(v) for v in values if v is not None)
        return f"{self.major:4d} {self.minor:7d} {self.name} {counters}"


def parse_line(line: str) -> DiskCounters:
    """Parse one line; ParseError if it is not a diskstats line of a known layout."""
    parts = line.split()
    n = len(parts) - 3
    if n < 11:
        raise ParseError(f"diskstats: expected 14 or more fields, got {len(parts)}: {line!r}")
    known = 17 if n >= 17 else 15 if n >= 15 else 11  # whole groups only
    try:
        major, minor = int(parts[0]), int(parts[1])
        values = map(int, parts[3 : 3 + known])
        counters = DiskCounters(major, minor, parts[2], *values)
    except ValueError:
        raise ParseError(f"diskstats: non-numeric field in {line!r}") from None
    if "-" in line and min(counters[:2] + counters[3 : 3 + known]) < 0:
        raise ParseError(f"diskstats: negative field in {line!r}")
    return counters


def parse(
    text: str, names: Collection[str] | None = None
) -> tuple[dict[str, DiskCounters], list[str]]:
    """Devices by kernel name (only `names` if given), plus one message per bad line.

    A malformed line costs only that device, never the whole snapshot. With `names`, their
    lines are found with str.find (the monitor's case, every sample: a host may list hundreds
    of loop and dm devices it does not watch).
    """
    lines = text.splitlines() if names is None else _lines_of(text, names)
    devices: dict[str, DiskCounters] = {}
    errors: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            counters = parse_line(line)
        except ParseError as exc:
            errors.append(str(exc))
            continue
        devices[counters.name] = counters
    return devices, errors


def _lines_of(text: str, names: Collection[str]) -> list[str]:
    """The lines whose name field is one of `names` (a name is never a number, so " sda "
    can only be the name field; any doubt falls back to reading every line's fields)."""
    lines = []
    for name in names:
        at = text.find(f" {name} ")
        if at < 0:
            continue
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        line = text[start : end if end >= 0 else len(text)]
        if _name_field(line) != name:
            return [ln for ln in text.splitlines() if _name_field(ln) in names]
        lines.append(line)
    return lines


def _name_field(line: str) -> str | None:
    parts = line.split(None, 3)
    return parts[2] if len(parts) > 2 else None


def read(path: str = PATH) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()
