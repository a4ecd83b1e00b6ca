"""The health check's look at who holds the metrics port, run as the monitor's own uid.

  setpriv --reuid=UID --regid=GID --clear-groups python3 -I metrics-holder-check.py PORT PID

The monitor runs as NB_USER, so NB_USER can kill it and listen on its port before supervisord
starts it again; the new monitor then carries on without metrics (a port held by another
program must not stop its sampling), and Prometheus, `diskinfo status`, the Slurm health
check and the Kubernetes labeler read whatever the other process serves. Exit 1 with one line
when the monitor supervisord started (PID, told to serve PORT) holds no listening socket on
PORT; 0 when it does, or when its descriptors cannot be read (no information: no verdict).

Run as the monitor's uid, not root: in a container root lacks CAP_SYS_PTRACE and may not
read another uid's /proc/PID/fd. Reads /proc only; prints numbers only.
"""

from __future__ import annotations

import os
import sys

LISTEN = "0A"


def listeners(port: int) -> dict[str, str]:
    """inode -> uid of every listening TCP socket on `port` in this network namespace."""
    found: dict[str, str] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    listens = len(fields) > 9 and fields[3] == LISTEN
                    if listens and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        found[fields[9]] = fields[7]
        except (OSError, ValueError):
            continue
    return found


def sockets(pid: int) -> set[str] | None:
    """The socket inodes `pid` holds; None when its descriptors cannot be read."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    held = set()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            held.add(target[8:-1])
    return held


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not all(a.isdigit() for a in argv):
        print("usage: metrics-holder-check.py PORT MONITOR_PID", file=sys.stderr)
        return 2
    port, monitor = int(argv[0]), int(argv[1])
    held = sockets(monitor)
    if held is None:
        return 0
    listening = listeners(port)
    if held & set(listening):
        return 0
    if listening:
        uids = ", ".join(sorted(set(listening.values())))
        print(f"the metrics port {port} is held by another process (uid {uids}), not by the "
              f"diskinfo monitor (pid {monitor}): what it serves is not the monitor's")  # fmt: skip
    else:
        print(f"the diskinfo monitor (pid {monitor}) serves no metrics on port {port}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
