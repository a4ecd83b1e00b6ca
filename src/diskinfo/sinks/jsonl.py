"""diskinfo.jsonl: one IntervalRecord.to_dict() per line (schema: docs/jsonl-schema.md).

Encoded by orjson, which walks the record's dataclasses in C: the record is the largest thing
the monitor builds each interval, and the stdlib encoder (with a Python hook per dataclass)
cost about 0.2 ms of a cold sample against orjson's 0.08 (benchmarks/results/overhead.md).
NaN and infinities, which are not JSON, are written as null, as orjson always does.
Text that is not UTF-8 (orjson refuses it, and with it the whole record) is cleaned where it
is collected (`utf8.utf8_text`); should some source still hand it over, the record is
written with that text escaped and the sink says so once, instead of losing every record.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

import orjson

from diskinfo import logfiles
from diskinfo.record import IntervalRecord
from diskinfo.rotating_file import RotatingFile
from diskinfo.utf8 import utf8_text

FILENAME = logfiles.JSONL
MAX_BYTES = 50 * 2**20  # where it rotates (to .1 ... .5): about 19 hours of records at 5 s


def encode(record: IntervalRecord) -> bytes:
    """One line: the record's fields in their declared order, compact, newline-terminated."""
    return orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE)


def _cleaned(value: Any) -> Any:
    """A to_dict() tree with every string (keys too) made valid UTF-8."""
    if isinstance(value, str):
        return utf8_text(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cleaned(v) for v in value]
    return value


class JsonlSink:
    def __init__(
        self,
        log_dir: str,
        max_bytes: int = MAX_BYTES,
        backups: int = 5,
        stderr: TextIO | None = None,
    ) -> None:
        self.file = RotatingFile(os.path.join(log_dir, FILENAME), max_bytes, backups)
        self._stderr = stderr
        self._warned = False

    def write(self, record: IntervalRecord) -> None:
        try:
            line = encode(record)
        except orjson.JSONEncodeError as exc:
            line = orjson.dumps(_cleaned(record.to_dict()), option=orjson.OPT_APPEND_NEWLINE)
            if not self._warned:
                self._warned = True
                print(
                    f"diskinfo: warning: {FILENAME}: a record held text that is not valid "
                    f"({exc}); written with that text escaped (said once)",
                    file=self._stderr or sys.stderr,
                    flush=True,
                )
        self.file.write(line)

    def close(self) -> None:
        self.file.close()
