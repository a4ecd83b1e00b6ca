"""The held verdict as a small JSON file beside the loader states, for readers in the container.

A notebook kernel (diskinfo.notebook) shows the verdict below its training cell. It reads
`$DISKINFO_STATE_DIR/monitor/verdict.json` rather than the monitor's /status endpoint: the
state directory belongs to this container (on `--network host`, 127.0.0.1:9101 may be another
container's monitor), it exists with the metrics port off, and the fix's words (paths of the
user's data) stay inside the container instead of on an exposed port.

The file sits in its own subdirectory: each atomic rename stamps the directory it happens in,
and the loader-state reader lists the state directory only when its stamp moves.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, TextIO

from diskinfo.complaints import SayOnce, kind_of
from diskinfo.fileio import read_regular, write_atomic
from diskinfo.loader_state import state_dir
from diskinfo.record import IntervalRecord

SCHEMA = "diskinfo.verdict/1"
SUBDIR = "monitor"
FILENAME = "verdict.json"
MAX_BYTES = 65536  # a document is under 2 kB


def verdict_path(directory: Path | None = None) -> Path:
    return (directory if directory is not None else state_dir()) / SUBDIR / FILENAME


def _cores(record: IntervalRecord, role: str, waiting: bool = False) -> float:
    """Cores' worth of CPU the role's processes used (`waiting`: spent runnable, waiting for
    a core the host's other work held)."""
    pct = sum(
        p.cpu_wait_percent if waiting else p.cpu_percent for p in record.procs if p.role == role
    )
    return round(pct / 100.0, 2)


def document(record: IntervalRecord, pid: int) -> dict[str, Any]:
    """What a reader shows: the held verdict, its first fix, the loop's data-wait share and
    the CPU of the processes that iterate the watched loaders (and of their workers)."""
    v = record.verdict
    ld = record.loader
    cpu = record.cpu
    allowed = None
    if cpu is not None:
        allowed = cpu.cgroup_cpu_allowed or (float(cpu.cpu_count) if cpu.cpu_count else None)
    return {
        "schema": SCHEMA,
        "pid": pid,
        "ts": record.ts,
        "interval_s": round(record.elapsed_s, 3),
        "verdict": v.verdict if v else None,
        "cause": v.cause if v else "",
        "summary": v.summary if v else "",
        # this interval's own decision: where it is not the held verdict, the summary's
        # figures are of the verdict's latest interval, not of the data-wait beside them
        "interval_verdict": (v.interval_verdict or v.verdict) if v else "",
        "fix": v.fixes[0] if v and v.fixes else "",
        "held_s": round(v.held_s, 1) if v else 0.0,
        "data_wait_share": ld.wait_share if ld is not None and ld.processes else None,
        "batches_s": round(ld.batches_s, 2) if ld is not None else None,
        "main_cores": _cores(record, "main"),
        "worker_cores": _cores(record, "worker"),
        "waiting_cores": round(_cores(record, "main", True) + _cores(record, "worker", True), 2),
        "workers": sum(1 for p in record.procs if p.role == "worker"),
        "cores_allowed": allowed,
    }


# what a reader formats as a number; a field of another type makes the document no verdict
NUMBERS = ("ts", "interval_s", "held_s", "main_cores", "worker_cores", "waiting_cores", "workers")


def read(path: Path) -> dict[str, Any] | None:
    """The latest document, None when there is none (no monitor, or it ended) or it is not
    one of ours. The state directory is the training user's to write: a planted FIFO or link
    is refused (read_regular), and a field of the wrong type makes it no document."""
    try:
        doc = json.loads(read_regular(path, MAX_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    optional = ("data_wait_share", "batches_s", "cores_allowed")
    if not all(isinstance(doc.get(k, 0), (int, float)) for k in NUMBERS) or not all(
        doc.get(k) is None or isinstance(doc[k], (int, float)) for k in optional
    ):
        return None
    if not all(
        isinstance(doc.get(k, ""), str) for k in ("summary", "fix", "cause", "interval_verdict")
    ):
        return None
    return doc


class VerdictFileSink:
    """Monitor sink: rewrites the file after every interval in which a process publishes
    loader figures (its readers are those processes: `diskinfo.torch.watch` shows it); removes
    it when none does, and when the monitor ends cleanly, so a reader never shows a dead
    monitor's verdict as live. Writing it with no reader cost 0.35 ms a sample, 40% of the
    whole monitor's CPU."""

    def __init__(self, directory: Path | None = None, stderr: TextIO | None = None) -> None:
        self.path = verdict_path(directory)
        self._stderr = stderr
        self._say = SayOnce()
        self._written = False

    def write(self, record: IntervalRecord) -> None:
        if record.loader is None and not record.wrapped_not_iterated:
            self.close()  # no watched loader lives: nobody to show it to
            return
        try:
            if not self._written:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps(document(record, os.getpid())))
            self._written = True
            self._say.reset()
        except OSError as exc:
            self._written = False
            self._say(
                kind_of(exc),
                f"cannot write {self.path}: {exc.strerror or exc}; notebooks will not show "
                "the verdict, the logs still do",
                self._stderr,
            )

    def close(self) -> None:
        if self._written and (read(self.path) or {}).get("pid") == os.getpid():
            with contextlib.suppress(OSError):
                self.path.unlink()
        self._written = False
