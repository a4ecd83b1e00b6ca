"""/proc/self/mountstats: per-mount NFS client statistics (the source of nfsiostat).

Each mount starts with `device SRC mounted on MNT with fstype T [statvers=V]`; NFS mounts
follow with tab-indented `age:`, `bytes:` (8 byte counters: normal/direct/server read and
write, pages) and, after `per-op statistics`, one line per RPC operation:
`READ: ops ntrans timeouts bytes_sent bytes_recv queue_ms rtt_ms execute_ms [errors]`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from diskinfo.sources import ParseError
from diskinfo.sources.mountinfo import escape, unescape

PATH = "/proc/self/mountstats"

BYTES_FIELDS = (
    "normal_read",
    "normal_write",
    "direct_read",
    "direct_write",
    "server_read",
    "server_write",
    "read_pages",
    "write_pages",
)
OP_FIELDS = ("ops", "ntrans", "timeouts", "bytes_sent", "bytes_recv", "queue_ms", "rtt_ms",
             "execute_ms", "errors")  # fmt: skip


@dataclass(frozen=True)
class OpStats:
    ops: int = 0
    ntrans: int = 0
    timeouts: int = 0
    bytes_sent: int = 0
    bytes_recv: int = 0
    queue_ms: int = 0
    rtt_ms: int = 0
    execute_ms: int = 0
    errors: int = 0


@dataclass
class NfsMount:
    source: str  # server:/export
    mountpoint: str
    fstype: str
    statvers: str = ""
    age: int = 0  # seconds since mount: going down means a remount
    bytes: dict[str, int] = field(default_factory=dict)
    ops: dict[str, OpStats] = field(default_factory=dict)

    @property
    def server(self) -> str:
        return self.source.rpartition(":")[0] or self.source

    def to_text(self) -> str:
        lines = [
            f"device {escape(self.source)} mounted on {escape(self.mountpoint)} with fstype "
            f"{self.fstype}" + (f" statvers={self.statvers}" if self.statvers else "")
        ]
        lines.append(f"\tage:\t{self.age}")
        if self.bytes:
            lines.append("\tbytes:\t" + " ".join(str(self.bytes[k]) for k in BYTES_FIELDS))
        if self.ops:
            lines.append("\tper-op statistics")
            for name, op in self.ops.items():
                values = [getattr(op, f) for f in OP_FIELDS]
                lines.append(f"\t{name:>12s}: " + " ".join(str(v) for v in values))
        return "\n".join(lines)


def _ints(text: str, what: str) -> list[int]:
    try:
        values = [int(v) for v in text.split()]
    except ValueError:
        raise ParseError(f"mountstats: non-numeric {what}: {text!r}") from None
    if any(v < 0 for v in values):
        raise ParseError(f"mountstats: negative {what}: {text!r}")
    return values


def parse(text: str) -> tuple[list[NfsMount], list[str]]:
    """NFS mounts (other filesystems are skipped), plus one message per bad line."""
    mounts: list[NfsMount] = []
    errors: list[str] = []
    current: NfsMount | None = None
    in_ops = False
    for line in text.split("\n"):
        if not line.strip():
            continue
        if line.startswith("device "):
            current, in_ops = None, False
            parts = line.split(" ")
            # device SRC mounted on MNT with fstype T [statvers=V]
            if (
                len(parts) < 8
                or parts[2:4] != ["mounted", "on"]
                or parts[5:7]
                != [
                    "with",
                    "fstype",
                ]
            ):
                errors.append(f"mountstats: bad device line {line!r}")
                continue
            fstype = parts[7]
            if fstype.startswith("nfs"):
                statvers = parts[8].partition("=")[2] if len(parts) > 8 else ""
                current = NfsMount(unescape(parts[1]), unescape(parts[4]), fstype, statvers)
                mounts.append(current)
            continue
        if current is None:
            continue
        key, colon, rest = line.strip().partition(":")
        try:
            if line.strip() == "per-op statistics":
                in_ops = True
            elif not colon:
                continue
            elif in_ops:
                values = _ints(rest, f"{key} counters")
                if len(values) not in (8, 9):
                    raise ParseError(f"mountstats: {key}: expected 8 or 9 counters: {line!r}")
                current.ops[key] = OpStats(*values)
            elif key == "age":
                values = _ints(rest, "age")
                if len(values) != 1:
                    raise ParseError(f"mountstats: bad age line {line!r}")
                current.age = values[0]
            elif key == "bytes":
                values = _ints(rest, "bytes")
                if len(values) != len(BYTES_FIELDS):
                    raise ParseError(f"mountstats: expected 8 byte counters: {line!r}")
                current.bytes = dict(zip(BYTES_FIELDS, values, strict=True))
        except ParseError as exc:
            errors.append(str(exc))
    return mounts, errors


def read(path: str = PATH) -> str:
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        return f.read()
