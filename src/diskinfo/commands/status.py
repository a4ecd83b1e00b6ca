"""`diskinfo status`: print the running monitor's /status JSON (node storage pressure).

Made for scheduler hooks: exit 0 with the JSON printed, 1 when the monitor cannot be reached
(one line on stderr), 3 with `--fail-on LEVEL` when the pressure is at or above LEVEL.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request

from diskinfo.analyse.pressure import LEVELS
from diskinfo.errors import UserError
from diskinfo.sinks.prometheus import DEFAULT_PORT

EXIT_PRESSURE = 3


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


def fetch(url: str, timeout: float) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            body = reply.read()
    except urllib.error.HTTPError as exc:
        raise UserError(f"monitor at {url} answered HTTP {exc.code}", exit_code=1) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise UserError(f"monitor not reachable at {url}: {reason}", exit_code=1) from None
    try:
        doc = json.loads(body)
    except ValueError:
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
