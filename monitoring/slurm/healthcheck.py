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
  DISKINFO_TIMEOUT     seconds to wait for the monitor (default 3)
  SCONTROL             the scontrol command (default scontrol on PATH)
Only the standard library: the node needs python3, not diskinfo (it runs in the container).
Exit 0 unless the arguments are wrong; slurmd does not act on the exit status.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.request

PREFIX = "diskinfo:"  # marks the drains this script owns
LEVELS = ("ok", "busy", "saturated")
DEFAULT_URL = "http://127.0.0.1:9101/status"


def fetch(url: str, timeout: float) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        doc = json.loads(reply.read())
    if not isinstance(doc, dict) or "pressure" not in doc:
        raise ValueError("answered JSON without 'pressure'")
    return doc


def reason(doc: dict, level: str) -> str:
    """The drain reason in words: the worst device or NFS mount at or above `level`, with the
    figures an admin reads in sinfo; the verdict when no device figure crosses it."""
    at_least = LEVELS.index(level)
    devices = [
        d for d in doc.get("devices") or [] if LEVELS.index(d.get("pressure", "ok")) >= at_least
    ]
    if devices:
        d = max(devices, key=lambda d: (LEVELS.index(d["pressure"]), d.get("await_ms") or 0))
        return (
            f"{PREFIX} {d['device']} {d['pressure']}, r_await {d.get('r_await') or 0:.0f} ms, "
            f"%util {d.get('util') or 0:.0f}"
        )
    mounts = [n for n in doc.get("nfs") or [] if LEVELS.index(n.get("pressure", "ok")) >= at_least]
    if mounts:
        n = mounts[0]
        rtt = n.get("read_rtt_ms") or 0
        return f"{PREFIX} NFS {n['mount']} {n['pressure']}, read RTT {rtt:.0f} ms"
    return f"{PREFIX} storage {doc['pressure']} ({doc.get('verdict') or 'no verdict'})"


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
    except (OSError, ValueError, urllib.error.URLError) as exc:
        print(f"diskinfo healthcheck: {node}: monitor not readable at {url}: "
              f"{getattr(exc, 'reason', exc)}; node left as it is", file=sys.stderr)  # fmt: skip
        return 0
    pressure = doc["pressure"]
    if pressure not in LEVELS:  # unknown: no recent record
        print(f"diskinfo healthcheck: {node}: pressure {pressure}; node left as it is",
              file=sys.stderr)  # fmt: skip
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
            print(f"diskinfo healthcheck: {node}: resumed, storage {pressure} (was: {why})")
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"diskinfo healthcheck: {node}: scontrol failed: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
