"""A small WSGI server that no client can exhaust: bounded threads, deadlines, a real backlog.

The monitor serves a few scrapers, but whoever reaches the port may hold connections open,
send a request byte by byte, or flood it. So one thread reads every request head without
blocking, each connection with a deadline from its accept (a slowloris gets 408 and is
closed), and only complete heads reach a fixed pool of workers that run the app and write
with a timeout. Idle connections cost a file descriptor and a small buffer, never a thread;
past `max_pending` the oldest one is dropped. The listen backlog is the system's maximum
(socketserver's default of 5 made every sixth connect of a burst wait a second).
"""

from __future__ import annotations

import contextlib
import io
import queue
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler

HEADER_TIMEOUT_S = 5.0  # accept -> complete request head
IO_TIMEOUT_S = 10.0  # writing one response
MAX_HEAD = 16 * 1024  # a scrape's request head is a few hundred bytes
WORKERS = 4
MAX_PENDING = 256  # connections still sending their head

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Any]


def _reply(status: str) -> bytes:
    body = f"{status}\n".encode()
    return (
        f"HTTP/1.0 {status}\r\nContent-Type: text/plain\r\nConnection: close\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


REQUEST_TIMEOUT = _reply("408 Request Timeout")
URI_TOO_LONG = _reply("414 URI Too Long")
HEAD_TOO_LARGE = _reply("431 Request Header Fields Too Large")
BUSY = _reply("503 Service Unavailable")


class _SocketWriter(io.BufferedIOBase):
    """wfile for the handler: whole writes with sendall (bounded by the socket's timeout)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sock.sendall(data)
        return len(data)


class _Handler(WSGIRequestHandler):
    """wsgiref's request handling on a head already read (no reads from the socket)."""

    default_request_version = "HTTP/1.0"  # a malformed request still gets a status line

    def __init__(self, sock: socket.socket, client: Any, server: BoundedWSGIServer, head: bytes):
        self._head = head
        super().__init__(sock, client, server)

    def setup(self) -> None:
        self.connection = self.request
        self.rfile = io.BytesIO(self._head)
        self.wfile = _SocketWriter(self.request)

    def finish(self) -> None:
        pass

    def get_stderr(self) -> io.StringIO:
        return io.StringIO()  # a client gone mid-reply is no news for the monitor's log

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds would flood the monitor's log."""


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


class BoundedWSGIServer:
    """Serves `app` on addr:port from 1 + `workers` threads, whatever the clients do."""

    def __init__(
        self,
        addr: str,
        port: int,
        app: WsgiApp,
        *,
        name: str = "wsgi",
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
        self.app = app
        self.max_pending = max_pending
        self.header_timeout = header_timeout
        self.io_timeout = io_timeout
        self.base_environ = {  # wsgiref's WSGIServer.setup_environ, without a DNS lookup
            "SERVER_NAME": addr,
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PORT": str(self.server_address[1]),
            "REMOTE_HOST": "",
            "CONTENT_LENGTH": "",
            "SCRIPT_NAME": "",
        }
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

    # --- what wsgiref's handler asks of its server ---
    def get_app(self) -> WsgiApp:
        return self.app

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

    # --- the workers: run the app on complete heads ---
    def _work(self) -> None:
        while (item := self._ready.get()) is not None:
            sock, client, head = item
            try:
                sock.settimeout(self.io_timeout)
                _Handler(sock, client, self, head)
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_WR)
            except Exception:
                pass
            finally:
                with contextlib.suppress(OSError):
                    sock.close()

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
