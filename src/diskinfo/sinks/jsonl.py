"""diskinfo.jsonl: one IntervalRecord.to_dict() per line (schema: docs/jsonl-schema.md).

Encoded by orjson, which walks the record's dataclasses in C: the record is the largest thing
the monitor builds each interval, and the stdlib encoder (with a Python hook per dataclass)
cost about 0.2 ms of a cold sample against orjson's 0.08 (benchmarks/results/overhead.md).
NaN and infinities, which are not JSON, are written as null, as orjson always does.
"""

from __future__ import annotations

import os

import orjson

from diskinfo.record import IntervalRecord
from diskinfo.sinks.rotating import RotatingFile

FILENAME = "diskinfo.jsonl"
MAX_BYTES = 50 * 2**20  # where it rotates (to .1 ... .5): about 19 hours of records at 5 s


def encode(record: IntervalRecord) -> bytes:
    """One line: the record's fields in their declared order, compact, newline-terminated."""
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


class JsonlSink:
    def __init__(self, log_dir: str, max_bytes: int = MAX_BYTES, backups: int = 5) -> None:
        self.file = RotatingFile(os.path.join(log_dir, FILENAME), max_bytes, backups)

    def write(self, record: IntervalRecord) -> None:
        self.file.write(encode(record))

    def close(self) -> None:
        self.file.close()
