"""`diskinfo status`: print the running monitor's /status JSON (node storage pressure).

Made for scheduler hooks: exit 0 with the JSON printed, 1 when the monitor cannot be reached
(one line on stderr), 3 with `--fail-on LEVEL` when the pressure is at or above LEVEL.

Whoever holds the metrics port answers (the container's user can take it: docs/security.md),
so the answer is read within `--timeout` in all and at most MAX_REPLY bytes, and printed as
JSON with every control and non-ASCII character escaped (`json.dumps`' default).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import socket
import threading
import urllib.parse

from diskinfo.analyse.pressure import LEVELS
from diskinfo.errors import UserError
from diskinfo.sinks.prometheus import DEFAULT_PORT

EXIT_PRESSURE = 3
MAX_REPLY = 1 << 20  # bytes; a /status is a few kB


def default_url(env: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """The URL of the local monitor, from the same variables the image gives the monitor."""
    if env.get("DISKINFO_STATUS_URL"):
        return env["DISKINFO_STATUS_URL"]
    port = env.get("METRICS_PORT") or str(DEFAULT_PORT)
    if port == "0":
        raise UserError("the monitor's metrics server is off (METRICS_PORT=0)", exit_code=1)
    addr = env.get("METRICS_ADDR") or "127.0.0.1"
    if addr in ("0.0.0.0", "::", "*"):  # a wildcard bind is reachable on loopback
        addr = "127.0.0.1" if addr != "::" else "::1"
    if ":" in addr:
        addr = f"[{addr}]"
    return f"http://{addr}:{port}/status"


def read_bounded(url: str, timeout: float, cap: int = MAX_REPLY) -> bytes:
    """The body of a GET of an http:// URL, within `timeout` seconds in all (a timer shuts the
    socket down: a per-read timeout lets a reply of a byte a second run for ever) and at most
    `cap` bytes, read as they come. UserError (exit 1) for anything else."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise UserError(f"not an http:// URL: {url}", exit_code=1)
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    expired = threading.Event()
    held: list[socket.socket] = []  # the connection drops its socket once a reply will close

    def cut() -> None:
        expired.set()
        for sock in held:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout, cut)
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        held.append(conn.sock)
        if expired.is_set():
            cut()
        conn.request("GET", parts.path or "/")
        reply = conn.getresponse()
        if reply.status != 200:
            raise UserError(f"monitor at {url} answered HTTP {reply.status}", exit_code=1)
        body = bytearray()
        while chunk := reply.read1(65536):
            body += chunk
            if len(body) > cap:
                raise UserError(f"monitor at {url} answered more than {cap} bytes", exit_code=1)
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set():
            raise UserError(f"monitor at {url}: no whole answer within {timeout:g} s",
                            exit_code=1) from None  # fmt: skip
        reason = getattr(exc, "strerror", None) or exc
        raise UserError(f"monitor not reachable at {url}: {reason}", exit_code=1) from None
    finally:
        timer.cancel()
        conn.close()
    if expired.is_set():
        raise UserError(f"monitor at {url}: no whole answer within {timeout:g} s", exit_code=1)
    return bytes(body)


def fetch(url: str, timeout: float) -> dict:
    body = read_bounded(url, timeout)
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise UserError(f"monitor at {url} did not answer JSON", exit_code=1) from None
    if not isinstance(doc, dict) or "pressure" not in doc:
        raise UserError(f"monitor at {url} answered JSON without 'pressure'", exit_code=1)
    return doc


def run(args: argparse.Namespace) -> int:
    url = args.url or default_url()
    doc = fetch(url, args.timeout)
    print(json.dumps(doc, indent=2))
    pressure = doc["pressure"]
    if args.fail_on and pressure in LEVELS and LEVELS.index(pressure) >= LEVELS.index(args.fail_on):
        return EXIT_PRESSURE
    return 0
