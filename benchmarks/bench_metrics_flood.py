"""The exporter under a connection flood: this tree against a reference tree, same run.

Each side runs the real monitor (`diskinfo watch --metrics-port`), is warmed up with 20
scrapes, then gets the issue's flood: 200 connections held open, 20 requests trickled a byte
every 0.5 s, and a burst of 300 complete requests. Recorded per side: threads and RSS before,
during and after; a scrape's latency idle and during the flood; the slowest connect of the
burst (the listen backlog); how many held connections the server itself closed within 10 s.

    python -m benchmarks.bench_metrics_flood [--reference GITREF] [--write]

The reference defaults to ae9baa4 (main before the bounded server), extracted with
`git archive`. `--write` rewrites benchmarks/results/metrics_flood.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from tests.helpers.flood import closed_by_server, hold, monitor, scrape, trickle, usage

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results/metrics_flood.md"


def timed_burst(port: int, n: int) -> tuple[int, float, float]:
    """n requests at once: (answered with 200 or 503, slowest connect s, slowest reply s)."""
    answered: list[int] = []
    connects: list[float] = []
    replies: list[float] = []

    def one() -> None:
        start = time.monotonic()
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 30) as c:
            connects.append(time.monotonic() - start)
            c.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            head = c.recv(64)
            while c.recv(65536):
                pass
            replies.append(time.monotonic() - start)
            if head.split(b" ")[1:2] in ([b"200"], [b"503"]):
                answered.append(1)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return len(answered), max(connects, default=0.0), max(replies, default=0.0)


def measure(workdir: Path, pythonpath: str | None) -> dict[str, float]:
    with monitor(workdir, pythonpath=pythonpath) as (proc, port):
        for _ in range(20):
            scrape(port)
        time.sleep(1.5)
        before = usage(proc.pid)
        idle = statistics.median(scrape(port) for _ in range(50))
        held = hold(port, 200)
        slow = trickle(port, 20, seconds=12)
        time.sleep(0.5)
        during = usage(proc.pid)
        try:
            flooded = statistics.median(scrape(port, timeout=30) for _ in range(5))
        except OSError:
            flooded = float("inf")
        answered, connect_max, reply_max = timed_burst(port, 300)
        peak = usage(proc.pid)
        closed = closed_by_server(held, timeout=10)  # then the client closes the rest
        for t in slow:
            t.join(15)
        time.sleep(3)
        after = usage(proc.pid)
    return {
        "threads before": before.threads,
        "threads during": max(during.threads, peak.threads),
        "threads after": after.threads,
        "RSS before (MiB)": before.rss_kib / 1024,
        "RSS peak (MiB)": max(during.rss_kib, peak.rss_kib) / 1024,
        "RSS after (MiB)": after.rss_kib / 1024,
        "RSS after / before": after.rss_kib / before.rss_kib,
        "scrape idle, median of 50 (s)": idle,
        "scrape during the flood, median of 5 (s)": flooded,
        "burst answered (of 300)": answered,
        "slowest connect of the burst (s)": connect_max,
        "slowest reply of the burst (s)": reply_max,
        "held closed by the server in 10 s (of 200)": closed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", default="ae9baa4", help="git ref of the reference tree")
    parser.add_argument("--write", action="store_true", help=f"rewrite {RESULTS.name}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-flood-") as tmp:
        ref = Path(tmp) / "reference"
        ref.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.reference, "src"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(ref)], input=archive, check=True)
        (Path(tmp) / "a").mkdir()
        (Path(tmp) / "b").mkdir()
        reference = measure(Path(tmp) / "a", str(ref / "src"))
        current = measure(Path(tmp) / "b", None)
    rev = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    rows = [
        f"| {key} | {reference[key]:.3g} | {current[key]:.3g} |"
        if isinstance(reference[key], float)
        else f"| {key} | {reference[key]} | {current[key]} |"
        for key in reference
    ]
    text = "\n".join(
        [
            "# The exporter under a connection flood",
            "",
            "`python -m benchmarks.bench_metrics_flood --write` (both sides in the same run, the",
            "real monitor with `--metrics-port`, shipped defaults). Flood: 200 connections held",
            "open, 20 requests trickled a byte every 0.5 s, a burst of 300 complete requests.",
            "",
            f"Machine: {platform.node()}, {platform.machine()}, Python {platform.python_version()},"
            f" {_cpus()} CPUs (shared). Tree {rev}; reference `{args.reference}`.",
            "",
            f"| figure | reference ({args.reference}) | this tree |",
            "|---|---|---|",
            *rows,
            "",
        ]
    )
    print(text)
    if args.write:
        RESULTS.write_text(text)


def _cpus() -> int:
    return os.cpu_count() or 0


if __name__ == "__main__":
    main()
