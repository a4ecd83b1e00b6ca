#!/usr/bin/python3
"""Slurm HealthCheckProgram: keep new jobs off a node while diskinfo reports its storage
saturated, and let them back once it is not, with no admin step.

slurm.conf (every node; docs/cluster.md):
    HealthCheckProgram=/etc/slurm/diskinfo-healthcheck.py
    HealthCheckInterval=30
    HealthCheckNodeState=ANY    # busy nodes too: they are the ones that saturate

Each run reads the node's monitor (`/status` of `diskinfo watch --metrics-port`) and:
- at or above DISKINFO_DRAIN_ON (default saturated): drains the node with a reason in words,
  `diskinfo: nvme0n1 saturated, r_await 180 ms, %util 99`. Running jobs go on; Slurm only
  stops placing new ones (the node shows DRAINING, then DRAINED).
- back at `ok` (not merely below the drain level: a device under load swings between busy and
  saturated from one interval to the next, and a node resumed in a dip takes a job onto the
  loaded disk): resumes the node, but only if this script drained it (its reason starts with
  `diskinfo:`); a node an admin or another check drained stays as they left it. Between the
  two (busy while drained by this script) the node stays drained.
- monitor unreachable or without a record yet: changes nothing (one line on stderr), so that a
  node is never drained or resumed on no information; DiskinfoMonitorDown alerts on that.

Environment (slurmd passes only SLURMD_NODENAME; set the rest in a wrapper if needed):
  DISKINFO_STATUS_URL  the monitor's /status (default http://127.0.0.1:9101/status)
  DISKINFO_DRAIN_ON    busy | saturated (default saturated)
  DISKINFO_TIMEOUT     seconds for the whole answer of the monitor (default 3)
  SCONTROL             the scontrol command (default scontrol on PATH)
Only the standard library: the node needs python3, not diskinfo (it runs in the container).
Exit 0 unless the arguments are wrong; slurmd does not act on the exit status.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.parse

PREFIX = "diskinfo:"  # marks the drains this script owns
LEVELS = ("ok", "busy", "saturated")
DEFAULT_URL = "http://127.0.0.1:9101/status"
# Whoever holds the node's metrics port answers here (the container's user can take it:
# docs/security.md), so the reply is bounded in size and in total time, and what reaches
# scontrol is printable ASCII of bounded length.
MAX_REPLY = 1 << 20  # bytes; a /status is a few kB
MAX_REASON = 160  # characters of a drain reason: one line of sinfo -R


def fetch(url: str, timeout: float) -> dict:
    """The monitor's /status, read within `timeout` seconds in all (not per read: a reply of a
    byte a second is cut off) and at most MAX_REPLY bytes, read as they come. The twin of
    diskinfo.commands.status.read_bounded: this script must run where diskinfo is not."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"not an http:// URL: {url!r}")
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    expired = threading.Event()
    held: list[socket.socket] = []  # the connection drops its socket once a reply will close

    def cut() -> None:  # a blocked read returns at once once its socket is shut down
        expired.set()
        for sock in held:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(timeout, cut)
    timer.start()
    try:
        conn.connect()
        held.append(conn.sock)
        if expired.is_set():
            cut()
        conn.request("GET", parts.path or "/")
        reply = conn.getresponse()
        if reply.status != 200:
            raise ValueError(f"answered HTTP {reply.status}")
        body = bytearray()
        while chunk := reply.read1(65536):
            body += chunk
            if len(body) > MAX_REPLY:
                raise ValueError(f"answered more than {MAX_REPLY} bytes")
    except (OSError, http.client.HTTPException) as exc:
        if expired.is_set():
            raise TimeoutError(f"no whole answer within {timeout:g} s") from None
        raise ValueError(str(exc) or type(exc).__name__) from None
    finally:
        timer.cancel()
        conn.close()
    if expired.is_set():
        raise TimeoutError(f"no whole answer within {timeout:g} s")
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        raise ValueError("did not answer JSON") from None
    if not isinstance(doc, dict) or "pressure" not in doc:
        raise ValueError("answered JSON without 'pressure'")
    return doc


def printable(text: object, limit: int = MAX_REASON) -> str:
    """Text from the node as scontrol may take it: printable ASCII only (escape codes,
    newlines and other bytes become '?'), at most `limit` characters."""
    out = "".join(ch if " " <= ch <= "~" else "?" for ch in str(text))
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _level(item: object) -> int:
    """An entry's pressure as an index into LEVELS; -1 for anything else."""
    pressure = item.get("pressure") if isinstance(item, dict) else None
    return LEVELS.index(pressure) if pressure in LEVELS else -1


def _number(value: object) -> float:
    """A figure from the node; 0 for anything that is not a finite number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if abs(value) < 1e12 else 0.0


def _entries(doc: dict, key: str) -> list[dict]:
    items = doc.get(key)
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def reason(doc: dict, level: str) -> str:
    """The drain reason in words: the worst device or NFS mount at or above `level`, with the
    figures an admin reads in sinfo; the verdict when no device figure crosses it. Every
    piece from the node is checked or made printable (`printable`): it is free text."""
    return printable(_reason(doc, LEVELS.index(level)))


def _reason(doc: dict, at_least: int) -> str:
    devices = [d for d in _entries(doc, "devices") if _level(d) >= at_least]
    if devices:
        d = max(devices, key=lambda d: (_level(d), _number(d.get("await_ms"))))
        return (
            f"{PREFIX} {printable(d.get('device'), 40)} {d['pressure']}, "
            f"r_await {_number(d.get('r_await')):.0f} ms, %util {_number(d.get('util')):.0f}"
        )
    mounts = [n for n in _entries(doc, "nfs") if _level(n) >= at_least]
    if mounts:
        n = mounts[0]
        rtt = _number(n.get("read_rtt_ms"))
        mount = printable(n.get("mount"), 60)
        return f"{PREFIX} NFS {mount} {n['pressure']}, read RTT {rtt:.0f} ms"
    verdict = printable(doc.get("verdict") or "no verdict", 80)
    return f"{PREFIX} storage {doc['pressure']} ({verdict})"


def node_state(scontrol: str, node: str) -> tuple[str, str]:
    """(State, Reason) of the node; the reason without Slurm's ' [user@time]' suffix."""
    out = subprocess.run(
        [scontrol, "show", "node", "-o", node], capture_output=True, text=True, timeout=30
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip() or f"scontrol exited {out.returncode}")
    state = re.search(r"\bState=(\S+)", out.stdout)
    why = re.search(r"\bReason=(.*?)(?: \[[^\]]*\])?(?= \w+=|$)", out.stdout)
    return (state.group(1) if state else ""), (why.group(1) if why else "")


def update(scontrol: str, node: str, *args: str) -> None:
    out = subprocess.run(
        [scontrol, "update", f"NodeName={node}", *args], capture_output=True, text=True, timeout=30
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip() or f"scontrol update exited {out.returncode}")


def main() -> int:
    os.environ.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
    env = os.environ
    drain_on = env.get("DISKINFO_DRAIN_ON", "saturated")
    if drain_on not in ("busy", "saturated"):
        why = f"DISKINFO_DRAIN_ON must be busy or saturated, not {drain_on!r}"
        print(f"diskinfo healthcheck: {why}", file=sys.stderr)
        return 2
    try:
        timeout = float(env.get("DISKINFO_TIMEOUT", "3"))
    except ValueError:
        print("diskinfo healthcheck: DISKINFO_TIMEOUT must be a number", file=sys.stderr)
        return 2
    url = env.get("DISKINFO_STATUS_URL") or DEFAULT_URL
    scontrol = env.get("SCONTROL", "scontrol")
    node = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]

    try:
        doc = fetch(url, timeout)
    except (OSError, ValueError) as exc:
        print(f"diskinfo healthcheck: {node}: monitor not readable at {printable(url)}: "
              f"{printable(exc)}; node left as it is", file=sys.stderr)  # fmt: skip
        return 0
    pressure = doc["pressure"]
    if pressure not in LEVELS:  # unknown: no recent record
        print(f"diskinfo healthcheck: {node}: pressure {printable(pressure, 40)}; node left as "
              "it is", file=sys.stderr)  # fmt: skip
        return 0
    try:
        state, why = node_state(scontrol, node)
        ours = "DRAIN" in state and why.startswith(PREFIX)
        if LEVELS.index(pressure) >= LEVELS.index(drain_on):
            if "DRAIN" not in state:
                text = reason(doc, drain_on)
                update(scontrol, node, "State=DRAIN", f"Reason={text}")
                print(f"diskinfo healthcheck: {node}: drained: {text}")
        elif ours and pressure == "ok":
            update(scontrol, node, "State=RESUME")
            was = printable(why)
            print(f"diskinfo healthcheck: {node}: resumed, storage {pressure} (was: {was})")
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"diskinfo healthcheck: {node}: scontrol failed: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
