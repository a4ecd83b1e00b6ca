"""Who a monitor is, as `key=value` lines: the heartbeat and the log-dir lock each carry one,
so that a second monitor can name (or check) the first."""

from __future__ import annotations

import os
import socket
import sys
import time


def owner_text(command: str | None = None, **extra: object) -> str:
    """pid, host, `extra` in order, start time (UTC) and the command line (500 characters)."""
    lines = {"pid": os.getpid(), "host": socket.gethostname(), **extra}
    lines["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    lines["command"] = (" ".join(sys.argv) if command is None else command)[:500]
    return "".join(f"{key}={value}\n" for key, value in lines.items())


def parse_owner(text: str) -> dict[str, str]:
    pairs = (line.partition("=") for line in text.splitlines())
    return {key: value for key, sep, value in pairs if sep}
