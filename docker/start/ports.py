"""Which of the container's service ports another program already holds, before they start.

With `docker run --network host` the container shares the host's ports: the host's own sshd
holds 22, a second container holds 8888 and 9101. A service started on a taken port fails to
bind and supervisord restarts it every few seconds, its error only in its own log, while the
banner shows a URL that reaches the *other* program. Found here, the service is not started
and `docker logs` and the banner say which `-e` setting to pass, with a port that is free now.

Usage: ports.py STATE_FILE NAME=ADDR:PORT...  (NAME: sshd, jupyter or metrics). For each taken
port, one line "NAME<TAB>reason" on stdout and in STATE_FILE (read by banner.py); exit 0.
"""

from __future__ import annotations

import errno
import socket
import sys

# the setting that moves each service, and what it is called in a sentence
SETTINGS = {"sshd": "SSH_PORT", "jupyter": "JUPYTER_PORT", "metrics": "METRICS_PORT"}
SEARCH = 100  # how many ports above a taken one to try
SSH_ALTERNATIVE = 2222


def taken(addr: str, port: int) -> bool:
    """True when binding ADDR:PORT as a server does (SO_REUSEADDR) fails with EADDRINUSE:
    something listens there or on the wildcard address. Other errors are not ours to judge."""
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((addr, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def free_above(addr: str, port: int, avoid: set[int]) -> int | None:
    """The first port above PORT that binds and no other service of ours wants; above a
    privileged port (22: the host's own sshd), from 2222, the usual SSH stand-in, on."""
    first = port + 1 if port >= 1024 else SSH_ALTERNATIVE
    for candidate in range(first, min(first + SEARCH, 65536)):
        if candidate not in avoid and not taken(addr, candidate):
            return candidate
    return None


def reason(name: str, port: int, free: int | None) -> str:
    """The one sentence docker logs and the banner give for a service left off."""
    setting = SETTINGS[name]
    move = f"-e {setting}={free}" if free else f"-e {setting}=<a free port>"
    return (
        f"port {port} is already in use here (with --network host: by the host or another"
        f" container); start this container with {move}"
    )


def check(wanted: list[tuple[str, str, int]]) -> list[tuple[str, str]]:
    """(name, reason) for each wanted (name, addr, port) whose port is taken."""
    ours = {port for _name, _addr, port in wanted}
    return [
        (name, reason(name, port, free_above(addr, port, ours)))
        for name, addr, port in wanted
        if taken(addr, port)
    ]


def parse(argument: str) -> tuple[str, str, int]:
    name, _, where = argument.partition("=")
    addr, _, port = where.rpartition(":")
    if name not in SETTINGS or not addr or not port.isdigit():
        raise ValueError(
            f"ports.py: expected NAME=ADDR:PORT with NAME one of {sorted(SETTINGS)}: {argument!r}"
        )
    return name, addr.strip("[]"), int(port)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: ports.py STATE_FILE NAME=ADDR:PORT...", file=sys.stderr)
        return 2
    try:
        wanted = [parse(argument) for argument in argv[1:]]
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    try:
        lines = [f"{name}\t{why}\n" for name, why in check(wanted)]
        with open(argv[0], "w", encoding="utf-8") as out:
            out.writelines(lines)
    except OSError as exc:  # no verdict on the ports: the services start as they would have
        print(f"ports.py: port check skipped: {exc}", file=sys.stderr)
        return 0
    sys.stdout.writelines(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
