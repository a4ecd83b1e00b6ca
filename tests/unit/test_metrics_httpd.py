"""The exporter's HTTP server against clients that hold, trickle, flood and never read.

Real sockets on loopback against the real server; short deadlines keep the tests fast
(tests/system/test_metrics_flood.py runs the monitor itself with the shipped defaults).
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator

import pytest

from diskinfo.record import IntervalRecord
from diskinfo.sinks.prometheus import PrometheusSink
from diskinfo.sinks.prometheus.httpd import BoundedHTTPServer
from tests.helpers.scrape import seconds


def server_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("diskinfo-metrics")]


@pytest.fixture
def sink() -> Iterator[PrometheusSink]:
    s = PrometheusSink(0, "127.0.0.1", header_timeout=1.0, io_timeout=1.0)
    s.write(IntervalRecord(ts=time.time(), elapsed_s=1.0))
    yield s
    s.close()


def reply_of(conn: socket.socket, timeout: float = 5) -> bytes:
    """Everything the server sends until it closes the connection."""
    conn.settimeout(timeout)
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


def test_held_connections_cost_no_threads_and_do_not_block_a_scrape(sink):
    threads = server_threads()
    assert len(threads) == 5  # the head reader and four workers, whatever the load
    held = [socket.create_connection(("127.0.0.1", sink.port), timeout=5) for _ in range(200)]
    try:
        assert seconds(sink.port, timeout=5) < 1.0  # answered while 200 connections sit idle
        assert server_threads() == threads
        # each idle connection gets 408 at its deadline and is closed
        start = time.monotonic()
        replies = [reply_of(c) for c in held]
        assert all(r.startswith(b"HTTP/1.0 408") for r in replies)
        assert time.monotonic() - start < 3.0
    finally:
        for c in held:
            c.close()
    assert server_threads() == threads
    assert seconds(sink.port, timeout=5) < 1.0


def test_a_request_trickled_byte_by_byte_is_cut_at_the_deadline(sink):
    conn = socket.create_connection(("127.0.0.1", sink.port), timeout=5)
    conn.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    start = time.monotonic()
    closed_after = None
    try:
        for _ in range(40):  # one byte every 0.1 s: would last 4 s without a deadline
            conn.sendall(b"X")
            time.sleep(0.1)
    except OSError:  # reset: the server closed it
        closed_after = time.monotonic() - start
    if closed_after is None:
        assert reply_of(conn).startswith(b"HTTP/1.0 408")
    else:
        assert closed_after < 2.0
    conn.close()
    assert seconds(sink.port, timeout=5) < 1.0


def test_a_burst_of_connects_is_accepted_at_once_and_every_request_answered(sink):
    def ask(results: list[bytes]) -> None:
        with socket.create_connection(("127.0.0.1", sink.port), timeout=10) as c:
            c.sendall(b"GET /status HTTP/1.0\r\n\r\n")
            results.append(reply_of(c, 10))

    results: list[bytes] = []
    clients = [threading.Thread(target=ask, args=(results,)) for _ in range(150)]
    start = time.monotonic()
    for t in clients:
        t.start()
    for t in clients:
        t.join(20)
    assert len(results) == 150 and time.monotonic() - start < 10
    statuses = {r.split(b" ", 2)[1] for r in results}
    assert statuses <= {b"200", b"503"} and b"200" in statuses  # busy is said, never a hang
    assert len(server_threads()) == 5


@pytest.mark.tools("ss")
def test_listen_backlog_is_the_systems_not_five(sink):
    out = subprocess.run(
        ["ss", "-Hltn", f"sport = :{sink.port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    backlog = int(out[2])  # a listening socket's Send-Q is its backlog
    assert backlog >= min(128, socket.SOMAXCONN)


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"GET /" + b"a" * 20000, b"414"),  # no end of line in sight
        (b"GET / HTTP/1.0\r\nX: " + b"b" * 20000, b"431"),
        (b"NONSENSE\r\n\r\n", b"400"),
        (b"GET / HTTP/9.9\r\n\r\n", b"505"),
        (b"POST /metrics HTTP/1.0\r\n\r\n", b"405"),
    ],
)
def test_malformed_requests_get_a_status_not_a_hang(sink, request_bytes, status):
    with socket.create_connection(("127.0.0.1", sink.port), timeout=5) as c:
        c.sendall(request_bytes)
        assert reply_of(c).split(b" ", 2)[1] == status


def test_a_client_that_never_reads_frees_its_worker_after_the_write_timeout():
    big = b"x" * (64 * 2**20)  # far more than the socket buffers hold

    def app(method, path):
        return "200 OK", [("Content-Type", "text/plain")], big if path == "/big" else b"small\n"

    server = BoundedHTTPServer("127.0.0.1", 0, app, workers=1, io_timeout=1.0)
    port = server.server_address[1]
    try:
        stuck = socket.create_connection(("127.0.0.1", port))
        stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stuck.sendall(b"GET /big HTTP/1.0\r\n\r\n")  # and never read
        time.sleep(0.2)
        start = time.monotonic()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/small", timeout=5) as reply:
            assert reply.read() == b"small\n"
        assert time.monotonic() - start < 3.0  # the one worker came back after ~1 s
        stuck.close()
    finally:
        server.close()


def test_a_full_queue_answers_503_at_once():
    release = threading.Event()

    def app(method, path):
        release.wait(10)
        return "200 OK", [("Content-Type", "text/plain")], b"ok\n"

    server = BoundedHTTPServer("127.0.0.1", 0, app, workers=1)  # 1 running + 4 queued
    port = server.server_address[1]
    conns = []
    try:
        for _ in range(8):
            c = socket.create_connection(("127.0.0.1", port), timeout=5)
            c.sendall(b"GET / HTTP/1.0\r\n\r\n")
            conns.append(c)
            time.sleep(0.05)
        busy = reply_of(conns[-1], timeout=2)
        assert busy.startswith(b"HTTP/1.0 503")
        release.set()
        assert reply_of(conns[0]).split(b" ", 2)[1] == b"200"
    finally:
        release.set()
        for c in conns:
            c.close()
        server.close()


def test_past_max_pending_the_oldest_idle_connection_goes():
    server = BoundedHTTPServer(
        "127.0.0.1", 0, lambda m, p: ("200 OK", [], b""), max_pending=10, header_timeout=30
    )
    port = server.server_address[1]
    try:
        first = socket.create_connection(("127.0.0.1", port), timeout=5)
        time.sleep(0.1)
        later = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(10)]
        assert reply_of(first, timeout=3) == b""  # closed without a word, long before 30 s
        for c in later:
            c.close()
        first.close()
    finally:
        server.close()


def test_close_ends_every_server_thread(sink):
    s = PrometheusSink(0, "127.0.0.1")
    before = len(server_threads())
    s.close()
    assert len(server_threads()) == before - 5


def test_head_gets_the_headers_alone_and_a_query_string_is_no_other_path(sink):
    with socket.create_connection(("127.0.0.1", sink.port), timeout=5) as c:
        c.sendall(b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head = reply_of(c)
    assert head.startswith(b"HTTP/1.0 200 OK\r\n") and head.endswith(b"\r\n\r\n")
    assert b"Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n" in head
    with socket.create_connection(("127.0.0.1", sink.port), timeout=5) as c:
        c.sendall(b"GET /status?x=1 HTTP/1.0\r\n\r\n")
        assert reply_of(c).split(b"\r\n", 1)[0] == b"HTTP/1.0 200 OK"
