"""Loading a recorded run: the monitor's JSONL (one `IntervalRecord.to_dict()` per line) into
records, with a one-line `UserError` for a missing, empty or malformed file, never a traceback."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from diskinfo.errors import UserError
from diskinfo.fileio import open_regular
from diskinfo.record import IntervalRecord, Verdict
from diskinfo.units import counted

_JUNK = "\0 \t\r"  # NULs: blocks a crash left unwritten; whitespace


def load_run(path: str | Path, warn: Callable[[str], None] | None = None) -> list[IntervalRecord]:
    """Records of one JSONL file; a one-line UserError for a missing, empty or bad file.

    A last line without its newline is a write in progress (the monitor still runs): skipped.
    A line that is not JSON in a file that has records is damage, not a wrong file: a crash
    or power loss leaves a cut line or a run of NUL bytes where the next start appends, so it
    is skipped and said once through `warn` (default: stderr), and the report still comes.
    A JSON line that is not an interval record is a wrong file: an error."""
    path = Path(path)
    try:
        with os.fdopen(open_regular(path), "rb") as f:  # a FIFO in its place: an error, no hang
            text = f.read().decode()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path} is not a JSONL file (not text)") from None
    lines = text.split("\n")
    partial = lines.pop() if lines else ""  # text after the last newline
    records = []
    damaged: list[tuple[int, UserError]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        line = line.strip(_JUNK)
        if not line:
            damaged.append((number, NotJson(f"{path} line {number}: NUL bytes, not JSON")))
            continue
        try:
            records.append(_parse(path, number, line))
        except NotJson as exc:
            damaged.append((number, exc))
    if partial.strip(_JUNK):
        with contextlib.suppress(UserError):
            records.append(_parse(path, len(lines) + 1, partial.strip(_JUNK)))
    if damaged and not records:
        raise damaged[0][1]  # nothing readable: most likely not a diskinfo run at all
    if not records:
        raise UserError(f"{path} holds no interval records (empty run)")
    if damaged:
        numbers = ", ".join(str(n) for n, _ in damaged[:3]) + (", ..." if len(damaged) > 3 else "")
        which = "line" if len(damaged) == 1 else "lines"
        message = (
            f"diskinfo: warning: {path}: skipped {counted(len(damaged), 'damaged line')} (not "
            f"JSON: {which} {numbers}), as a crash or power loss leaves them; "
            f"{counted(len(records), 'record')} read"
        )
        if warn is None:
            print(message, file=sys.stderr)
        else:
            warn(message)
    return records


def split_runs(records: Sequence[IntervalRecord]) -> list[list[IntervalRecord]]:
    """The runs one file gathers, in file order: every start of the monitor appends to the same
    diskinfo.jsonl (the image's logs folder is mounted again for each container), and each
    record carries its run's `started`. Records from before that field (0) make one run."""
    runs: list[list[IntervalRecord]] = []
    for rec in records:
        if runs and runs[-1][-1].started == rec.started:
            runs[-1].append(rec)
        else:
            runs.append([rec])
    return runs


COMMAND_WIDTH = 48  # a label beside a run's number, not the whole line


def command_label(records: Sequence[IntervalRecord]) -> str:
    """The run's training command, shortened to COMMAND_WIDTH characters; "" when no record
    names one (a monitor without a training command, or records older than the field)."""
    command = next((r.command for r in records if r.command), "")
    return command if len(command) <= COMMAND_WIDTH else command[: COMMAND_WIDTH - 3] + "..."


TAIL_BYTES = 1 << 16  # more than one record's line (about 4 kB with a training job's figures)


def last_started(path: Path) -> float | None:
    """`started` of a file's last complete record, read from its tail only (a rotated file is
    50 MiB): whether the run that the next newer file begins with goes on in this one."""
    try:
        with os.fdopen(open_regular(path), "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read()
    except OSError:
        return None
    for line in reversed(tail.split(b"\n")[1:] if size > TAIL_BYTES else tail.split(b"\n")):
        line = line.strip(_JUNK.encode())
        if line:
            try:
                started = json.loads(line).get("started")
            except (ValueError, AttributeError):
                continue  # a line cut short by a crash: the one before it
            return started if isinstance(started, (int, float)) and started > 0 else None
    return None


def load_with_rotated(
    path: str | Path, warn: Callable[[str], None] | None = None
) -> tuple[list[IntervalRecord], list[Path]]:
    """A file's records, with the beginning of its first run from the rotated files before it
    (`path.1`, `path.2`, ...) when that run began there: the JSONL rotates at 50 MiB, about 19
    hours at the image's 5 s, and a run of days is to be reported whole. Also the files read."""
    path = Path(path)
    records = load_run(path, warn)
    started, read = records[0].started, []
    while started:
        older = path.with_name(f"{path.name}.{len(read) + 1}")
        if last_started(older) != started:
            break
        kept = load_run(older, warn)
        begin = len(kept)
        while begin and kept[begin - 1].started == started:
            begin -= 1
        records = kept[begin:] + records
        read.append(older)
        if begin:  # the run began in this file
            break
    return records, read


class NotJson(UserError):
    """A line that does not parse at all: damage when the file's other lines are records."""


def _parse(path: Path, number: int, line: str) -> IntervalRecord:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise NotJson(f"{path} line {number}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(
        "diskinfo.interval/"
    ):
        raise UserError(f"{path} line {number}: not a diskinfo interval record")
    try:
        record = IntervalRecord.from_dict(data)
        _check_numbers(record)
    except (TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{path} line {number}: malformed interval record ({exc})") from None
    return record


def _check_numbers(obj: Any) -> None:
    """Every field whose default is a number must hold a finite number (null, which the JSONL
    sink writes for NaN, becomes the default): the summary does arithmetic on them, and a
    string there would end in a traceback instead of this one-line error."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(f.default, (int, float)) and not isinstance(f.default, bool):
            if value is None:  # the JSONL sink writes NaN as null: not measured
                setattr(obj, f.name, value := f.default)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{type(obj).__name__}.{f.name} is not a number: {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"{type(obj).__name__}.{f.name} is not finite: {value!r}")
        children = value if isinstance(value, list) else [value]
        for child in children:
            if dataclasses.is_dataclass(child):
                _check_numbers(child)
    if isinstance(obj, Verdict) and not (
        isinstance(obj.verdict, str)
        and isinstance(obj.fixes, list)
        and all(isinstance(x, str) for x in [*obj.fixes, *obj.warnings])
    ):
        raise ValueError(f"verdict is not text with a list of fixes: {obj.verdict!r}")
    if isinstance(obj, IntervalRecord):
        if not isinstance(obj.ts, (int, float)) or not math.isfinite(obj.ts):
            raise ValueError(f"ts is not a time: {obj.ts!r}")
        if not isinstance(obj.elapsed_s, (int, float)) or not obj.elapsed_s >= 0:
            raise ValueError(f"elapsed_s is not a duration: {obj.elapsed_s!r}")
