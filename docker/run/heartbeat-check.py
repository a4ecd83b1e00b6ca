"""The health check's look at the monitor's heartbeat, run as root in a folder NB_USER writes.

  heartbeat-check.py STATE_DIR DEFAULT_INTERVAL

Exit 0 when `STATE_DIR/heartbeat` is younger than 3 x interval + 10 s (the interval from the
file's `interval_s=` line, else DEFAULT_INTERVAL), else 1 with one line saying why.

`head` on the file by name blocked for ever on a FIFO swapped in between the type check and
the read, one more root process at every check. Here the folder is opened once without
following a link, the file relative to it with O_NONBLOCK|O_NOFOLLOW (a FIFO opens at once, a
link not at all), its type and age come from fstat on that descriptor, and at most 4 KiB of
it is read, only when it is a regular file. Only the standard library: root's python3 -I.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import time

NAME = "heartbeat"
CAP = 4096
NUMBER = re.compile(r"[0-9]{1,9}(\.[0-9]{1,6})?")


def read_beat(state_dir: str) -> tuple[float, bytes]:
    """(mtime, first CAP bytes) of the heartbeat; OSError or ValueError with the reason."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
    folder = os.open(state_dir, flags | os.O_DIRECTORY)
    try:
        fd = os.open(NAME, flags, dir_fd=folder)
    finally:
        os.close(folder)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        return st.st_mtime, os.read(fd, CAP)
    finally:
        os.close(fd)


def field(text: str, key: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(key + "="):
            return line[len(key) + 1 :]
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: heartbeat-check.py STATE_DIR DEFAULT_INTERVAL", file=sys.stderr)
        return 2
    state_dir, default = argv
    where = f"{state_dir}/{NAME}"
    try:
        mtime, data = read_beat(state_dir)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        print(f"diskinfo has not sampled yet (no heartbeat at {where}: {why})")
        return 1
    text = data.decode("ascii", "replace")
    interval = field(text, "interval_s")
    if interval is None or not NUMBER.fullmatch(interval):
        interval = default if NUMBER.fullmatch(default) else "5"
    pid = field(text, "pid")
    pid = pid if pid is not None and pid.isdigit() and len(pid) < 10 else "?"
    age = int(time.time() - mtime)
    limit = int(3 * float(interval) + 10)
    if age > limit:
        print(f"diskinfo (pid {pid}) has not sampled for {age} s (limit 3 x {interval} s + 10 s"
              f" = {limit} s): stopped or hung")  # fmt: skip
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
