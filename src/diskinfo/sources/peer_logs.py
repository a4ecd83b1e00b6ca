"""The other nodes of a job, as their monitors log them into one shared logs folder.

`diskinfo watch --job-logs DIR`: each node's monitor writes its own folder of DIR
(DIR/<node>/diskinfo.jsonl); every interval this reads the latest record of each other folder
from the end of its file (the last TAIL_BYTES only), so a node's verdict can be told which rank
holds the job back (analyse/job.in_job). Nothing here is trusted more than a log line: a
file that is not regular (a link, a FIFO), or a line that is not a record, is skipped.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from diskinfo import logfiles
from diskinfo.record import IntervalRecord

TAIL_BYTES = 256 * 1024  # a record is a few kB; the last complete line is in here


def _tail(path: Path) -> tuple[tuple[int, int, int], bytes]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        os.lseek(fd, max(0, st.st_size - TAIL_BYTES), os.SEEK_SET)
        return key, os.read(fd, TAIL_BYTES)
    finally:
        os.close(fd)


def last_record(data: bytes) -> IntervalRecord | None:
    """The last complete record in a file's tail (a line still being written is skipped)."""
    lines = data.split(b"\n")[:-1]  # after the last newline: a write in progress
    for line in reversed(lines[-4:]):
        try:
            return IntervalRecord.from_dict(json.loads(line))
        except (ValueError, TypeError, AttributeError):
            continue
    return None


class PeerLogs:
    """The latest record of every other node's folder of a job's shared logs folder."""

    def __init__(self, folder: Path | str, own: Path | str) -> None:
        self.folder = Path(folder)
        self.own = Path(own).resolve()
        self._cache: dict[Path, tuple[tuple[int, int, int], IntervalRecord | None]] = {}

    def __call__(self) -> list[IntervalRecord]:
        try:
            folders = [e for e in os.scandir(self.folder) if e.is_dir(follow_symlinks=False)]
        except OSError:
            return []
        out = []
        for entry in folders:
            path = Path(entry.path) / logfiles.JSONL
            if Path(entry.path).resolve() == self.own:
                continue
            hit = self._cache.get(path)
            try:
                st = os.stat(path, follow_symlinks=False)
                if hit is None or hit[0] != (st.st_ino, st.st_size, st.st_mtime_ns):
                    key, data = _tail(path)
                    hit = self._cache[path] = (key, last_record(data))
            except OSError:
                continue
            if hit[1] is not None:
                out.append(hit[1])
        return out
