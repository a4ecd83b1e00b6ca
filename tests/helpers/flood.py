"""A real monitor with its exporter on, and the clients that attack it: held connections,
requests trickled byte by byte, bursts. Shared by tests/system/test_metrics_flood.py and
benchmarks/bench_metrics_flood.py."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.net import free_port, wait_for_port
from tests.helpers.scrape import seconds


@dataclass
class Usage:
    rss_kib: int
    threads: int


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def usage(pid: int) -> Usage:
    """VmRSS and Threads from /proc/PID/status."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()[0] if value.split() else ""
    return Usage(int(fields["VmRSS"]), int(fields["Threads"]))


@contextlib.contextmanager
def monitor(
    workdir: Path, interval: float = 1.0, pythonpath: str | None = None, nofile: int = 0
) -> Iterator[tuple[subprocess.Popen, int]]:
    """`diskinfo watch` on workdir with /metrics on a free port: (process, port). `pythonpath`
    runs another tree's diskinfo (a benchmark's reference); `nofile` caps its descriptors."""

    def limit() -> None:
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    port = free_port()
    env = dict(os.environ, DISKINFO_STATE_DIR=str(workdir / "state"))
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    proc = subprocess.Popen(
        [sys.executable, "-m", "diskinfo.cli", "watch", str(workdir), "--interval", str(interval),
         "--log-dir", str(workdir / "logs"), "--echo", "never", "--metrics-port", str(port)],
        env=env,
        preexec_fn=limit,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        wait_for_port(port, 30)
        yield proc, port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


scrape = seconds  # seconds one whole scrape took (tests.helpers.scrape)


def hold(port: int, n: int) -> list[socket.socket]:
    """n connections that send nothing (the issue's flood)."""
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]


def trickle(port: int, n: int, seconds: float) -> list[threading.Thread]:
    """n slowloris clients: a request head, one more byte every 0.5 s, for `seconds`."""

    def one() -> None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 10) as c:
            c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                c.sendall(b"X")
                time.sleep(0.5)

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return threads


def burst(port: int, n: int) -> int:
    """n complete requests at once from n threads; how many got a 200 or a 503."""
    answered = []

    def one() -> None:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 10) as c:
            c.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            head = c.recv(64)
            if head.split(b" ")[1:2] in ([b"200"], [b"503"]):
                answered.append(1)
            while c.recv(65536):
                pass

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return len(answered)


def closed_by_server(conns: list[socket.socket], timeout: float) -> int:
    """How many of conns the server closed within timeout (it answers 408, then EOF)."""
    deadline = time.monotonic() + timeout
    closed = 0
    for c in conns:
        c.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            while c.recv(4096):
                pass
            closed += 1
        except ConnectionResetError:
            closed += 1
        except OSError:  # still open at the deadline
            pass
        c.close()
    return closed
