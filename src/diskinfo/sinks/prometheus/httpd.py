"""A small HTTP server that no client can exhaust: bounded threads, deadlines, a real backlog.

The monitor serves a few scrapers, but whoever reaches the port may hold connections open,
send a request byte by byte, or flood it. So one thread reads every request head without
blocking, each connection with a deadline from its accept (a slowloris gets 408 and is
closed), and only complete heads reach a fixed pool of workers that run the app and write
with a timeout. Idle connections cost a file descriptor and a small buffer, never a thread;
past `max_pending` the oldest one is dropped. The listen backlog is the system's maximum
(socketserver's default of 5 made every sixth connect of a burst wait a second).

The request line is parsed here rather than by wsgiref or http.server: those bring http.client
and the email package into the monitor (megabytes of resident memory) to read one line whose
headers the monitor never needs.
"""

from __future__ import annotations

import contextlib
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

HEADER_TIMEOUT_S = 5.0  # accept -> complete request head
IO_TIMEOUT_S = 10.0  # writing one response
MAX_HEAD = 16 * 1024  # a scrape's request head is a few hundred bytes
WORKERS = 4
MAX_PENDING = 256  # connections still sending their head

# (status, headers, body) for one request; the server adds Content-Length and Connection
Reply = tuple[str, list[tuple[str, str]], bytes]
# called with the request's method and path (the query string cut off)
Handler = Callable[[str, str], Reply]


def response(
    status: str, headers: list[tuple[str, str]], body: bytes, *, head: bool = False
) -> bytes:
    """One whole HTTP/1.0 response; the connection closes after it."""
    lines = [f"HTTP/1.0 {status}", *(f"{k}: {v}" for k, v in headers)]
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode("latin-1") + (b"" if head else body)


def _reply(status: str) -> bytes:
    return response(status, [("Content-Type", "text/plain")], f"{status}\n".encode())


BAD_REQUEST = _reply("400 Bad Request")
REQUEST_TIMEOUT = _reply("408 Request Timeout")
URI_TOO_LONG = _reply("414 URI Too Long")
HEAD_TOO_LARGE = _reply("431 Request Header Fields Too Large")
BUSY = _reply("503 Service Unavailable")
VERSION_NOT_SUPPORTED = _reply("505 HTTP Version Not Supported")


def request_line(head: bytes) -> tuple[str, str] | bytes:
    """(method, path) of a request head, or the reply that refuses it (http.server's rules:
    three words, an HTTP/1.x version; a header is never needed here)."""
    words = head.split(b"\n", 1)[0].decode("latin-1").split()
    if len(words) != 3 or not words[2].startswith("HTTP/"):
        return BAD_REQUEST
    major, dot, minor = words[2][5:].partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        return BAD_REQUEST
    if int(major) != 1:
        return VERSION_NOT_SUPPORTED
    return words[0], words[1].split("?", 1)[0]


class _Pending:
    __slots__ = ("client", "deadline", "head", "sock")

    def __init__(self, sock: socket.socket, client: Any, deadline: float) -> None:
        self.sock = sock
        self.client = client
        self.deadline = deadline
        self.head = bytearray()


def _send_and_close(sock: socket.socket, reply: bytes = b"") -> None:
    with contextlib.suppress(OSError):
        if reply:
            sock.send(reply)  # non-blocking, best effort: a few hundred bytes fit the buffer
    with contextlib.suppress(OSError):
        sock.close()


class BoundedHTTPServer:
    """Serves `handler` on addr:port from 1 + `workers` threads, whatever the clients do."""

    def __init__(
        self,
        addr: str,
        port: int,
        handler: Handler,
        *,
        name: str = "httpd",
        workers: int = WORKERS,
        max_pending: int = MAX_PENDING,
        header_timeout: float = HEADER_TIMEOUT_S,
        io_timeout: float = IO_TIMEOUT_S,
    ) -> None:
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET  # "localhost" stays IPv4
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind((addr, port))
            self.socket.listen(socket.SOMAXCONN)
        except OSError:
            self.socket.close()
            raise
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self.handler = handler
        self.max_pending = max_pending
        self.header_timeout = header_timeout
        self.io_timeout = io_timeout
        self._pending: dict[socket.socket, _Pending] = {}  # accept order = deadline order
        self._ready: queue.Queue[tuple[socket.socket, Any, bytes] | None] = queue.Queue(
            maxsize=4 * workers
        )
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self.socket, selectors.EVENT_READ)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._closing = False
        self._threads = [threading.Thread(target=self._read_heads, name=name, daemon=True)]
        self._threads += [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    # --- the reader: accepts, collects heads, enforces deadlines ---
    def _read_heads(self) -> None:
        while not self._closing:
            try:
                self._read_round()
            except Exception:  # a bug must not end the only reader: the port would go dead
                time.sleep(0.1)
        for pending in list(self._pending.values()):
            self._drop(pending)

    def _read_round(self) -> None:
        timeout = None
        if self._pending:
            first = next(iter(self._pending.values()))
            timeout = max(0.0, first.deadline - time.monotonic())
        for key, _ in self._selector.select(timeout):
            if key.fileobj is self.socket:
                self._accept()
            elif key.fileobj is self._wake_r:
                with contextlib.suppress(OSError):
                    self._wake_r.recv(64)
            else:
                self._receive(key.data)
        self._expire(time.monotonic())

    def _accept(self) -> None:
        while True:
            try:
                sock, client = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of descriptors: free one, and do not spin on the backlog
                if self._pending:
                    self._drop(next(iter(self._pending.values())))
                else:
                    time.sleep(0.1)
                return
            sock.setblocking(False)
            if len(self._pending) >= self.max_pending:  # the oldest is the likeliest idler
                self._drop(next(iter(self._pending.values())))
            pending = _Pending(sock, client, time.monotonic() + self.header_timeout)
            self._pending[sock] = pending
            self._selector.register(sock, selectors.EVENT_READ, pending)

    def _receive(self, pending: _Pending) -> None:
        if pending.sock not in self._pending:  # dropped earlier in this round of events
            return
        try:
            data = pending.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the client went away before finishing its request
            self._drop(pending)
            return
        pending.head += data
        head = pending.head
        if b"\r\n\r\n" in head or b"\n\n" in head:
            self._forget(pending)
            try:
                self._ready.put_nowait((pending.sock, pending.client, bytes(head)))
            except queue.Full:
                _send_and_close(pending.sock, BUSY)
        elif len(head) > MAX_HEAD:
            self._drop(pending, URI_TOO_LONG if b"\n" not in head else HEAD_TOO_LARGE)

    def _expire(self, now: float) -> None:
        while self._pending:
            first = next(iter(self._pending.values()))
            if first.deadline > now:
                return
            self._drop(first, REQUEST_TIMEOUT)

    def _forget(self, pending: _Pending) -> None:
        del self._pending[pending.sock]
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(pending.sock)

    def _drop(self, pending: _Pending, reply: bytes = b"") -> None:
        self._forget(pending)
        _send_and_close(pending.sock, reply)

    # --- the workers: run the handler on complete heads ---
    def _work(self) -> None:
        while (item := self._ready.get()) is not None:
            sock, _client, head = item
            try:
                sock.settimeout(self.io_timeout)
                sock.sendall(self._answer(head))
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_WR)
            except Exception:  # a client gone mid-reply is no news for the monitor's log
                pass
            finally:
                with contextlib.suppress(OSError):
                    sock.close()

    def _answer(self, head: bytes) -> bytes:
        request = request_line(head)
        if isinstance(request, bytes):
            return request
        method, path = request
        status, headers, body = self.handler(method, path)
        return response(status, headers, body, head=method == "HEAD")

    def close(self) -> None:
        """Stop accepting, drop what is pending, let the workers finish their reply."""
        if self._closing:
            return
        self._closing = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._threads[0].join(timeout=5)
        while True:
            try:
                item = self._ready.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                _send_and_close(item[0])
        for _ in self._threads[1:]:
            self._ready.put(None)
        for thread in self._threads[1:]:
            thread.join(timeout=self.io_timeout)
        self._selector.close()
        for sock in (self.socket, self._wake_r, self._wake_w):
            sock.close()
