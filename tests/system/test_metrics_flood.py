"""The monitor's exporter under the issue's flood, measured on the real process.

200 connections held open, 20 requests trickled byte by byte and a burst of 300 requests:
the monitor keeps its thread count, answers a scrape during the flood, closes the idle
connections at the 5 s head deadline, and its RSS returns to the baseline afterwards (the
old server made 202 threads and kept 17 MB). Shipped defaults, no test settings.
"""

from __future__ import annotations

import time

import pytest

from tests.helpers.flood import (
    burst,
    closed_by_server,
    cpu_seconds,
    hold,
    monitor,
    scrape,
    trickle,
    usage,
)

pytestmark = pytest.mark.system

RSS_SLACK_KIB = 2048  # allocator noise; the old server kept +17 MB


def test_flood_leaves_threads_and_rss_at_their_baseline(tmp_path):
    with monitor(tmp_path) as (proc, port):
        for _ in range(20):  # warm up: first render, imports, allocator arenas
            scrape(port)
        time.sleep(1.5)
        before = usage(proc.pid)

        rounds = []
        for _ in range(2):  # a second round must not grow either: nothing accumulates
            held = hold(port, 200)
            slow = trickle(port, 20, seconds=12)
            during = usage(proc.pid)
            latency = scrape(port)
            answered = burst(port, 300)
            assert closed_by_server(held, timeout=10) == 200  # 408 at the 5 s deadline
            for t in slow:
                t.join(15)
            time.sleep(1.5)
            after = usage(proc.pid)
            rounds.append((during, latency, answered, after))
            assert during.threads == before.threads
            assert latency < 1.0, "a scrape waited behind the flood"
            assert answered == 300, "requests of the burst went unanswered"
            assert after.threads == before.threads
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""

    growth = [after.rss_kib - before.rss_kib for _, _, _, after in rounds]
    print(f"\nbaseline {before}; rounds (during, scrape s, answered, after): {rounds}")
    assert max(growth) <= RSS_SLACK_KIB, f"RSS grew by {growth} KiB over {before.rss_kib} KiB"


def test_out_of_descriptors_the_server_neither_spins_nor_dies(tmp_path):
    """More held connections than the monitor may open files: accept fails with EMFILE. The
    server frees the oldest idle connection instead of retrying in a busy loop."""
    with monitor(tmp_path, nofile=64) as (proc, port):
        scrape(port)
        held = hold(port, 150)
        time.sleep(0.5)
        start = cpu_seconds(proc.pid)
        time.sleep(3)
        spent = cpu_seconds(proc.pid) - start
        for c in held:
            c.close()
        time.sleep(1)
        assert scrape(port) < 1.0
        assert proc.poll() is None
    assert spent < 1.0, f"{spent:.2f} CPU s in 3 s: a busy loop"
