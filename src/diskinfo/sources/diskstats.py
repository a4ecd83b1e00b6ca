"""/proc/diskstats: one snapshot of every block device's cumulative counters.

Field layout (Documentation/admin-guide/iostats.rst): 3 identity fields, then 11 counters
(all kernels since 2.6), 4 discard counters (4.18+) and 2 flush counters (5.5+). Sectors are
always 512 bytes whatever the device's block size. Counts are `unsigned long`, times (ms) are
`unsigned int` in the kernel, so both can wrap; rates.py deals with that.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from diskinfo.sources import ParseError

PATH = "/proc/diskstats"
SECTOR_BYTES = 512

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


@dataclass(frozen=True)
class DiskCounters:
    """One line of /proc/diskstats. Discard and flush counters are None on older kernels."""

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

    def to_line(self) -> str:
        """The /proc/diskstats line for these counters (the kernel's own format)."""
        values = [getattr(self, name) for name in ALL_FIELDS]
        counters = " ".join(str(v) for v in values if v is not None)
        return f"{self.major:4d} {self.minor:7d} {self.name} {counters}"


def parse_line(line: str) -> DiskCounters:
    """Parse one line; ParseError if it is not a diskstats line of a known layout."""
    parts = line.split()
    n = len(parts) - 3
    if n not in (11, 15, 17):
        raise ParseError(f"diskstats: expected 14, 18 or 20 fields, got {len(parts)}: {line!r}")
    try:
        major, minor = int(parts[0]), int(parts[1])
        values = [int(p) for p in parts[3:]]
    except ValueError:
        raise ParseError(f"diskstats: non-numeric field in {line!r}") from None
    if major < 0 or minor < 0 or any(v < 0 for v in values):
        raise ParseError(f"diskstats: negative field in {line!r}")
    return DiskCounters(major, minor, parts[2], *values)


def parse(
    text: str, names: Collection[str] | None = None
) -> tuple[dict[str, DiskCounters], list[str]]:
    """Devices by kernel name (only `names` if given), plus one message per bad line.

    A malformed line costs only that device, never the whole snapshot.
    """
    devices: dict[str, DiskCounters] = {}
    errors: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if names is not None:
            parts = line.split(None, 3)
            if len(parts) > 2 and parts[2] not in names:
                continue
        try:
            counters = parse_line(line)
        except ParseError as exc:
            errors.append(str(exc))
            continue
        devices[counters.name] = counters
    return devices, errors


def read(path: str = PATH) -> str:
    with open(path, encoding="ascii", errors="replace") as f:
        return f.read()
