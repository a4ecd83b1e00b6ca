"""One variable of a process's environment as it started (/proc/PID/environ)."""

from __future__ import annotations


def parse_environ(data: bytes, name: str) -> str | None:
    """The value of `name` in NUL-separated environ text; None where it is not set."""
    prefix = name.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode("utf-8", "replace")
    return None


def read_environ(pid: int, name: str) -> str | None:
    """None also where the file cannot be read (the process left, or belongs to another user)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return parse_environ(handle.read(), name)
    except OSError:
        return None
