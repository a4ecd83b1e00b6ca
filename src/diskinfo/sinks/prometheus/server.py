"""The exporter as a monitor sink: keeps the latest record, serves /metrics and /status."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from diskinfo.analyse.pressure import status_document
from diskinfo.errors import UserError
from diskinfo.record import IntervalRecord
from diskinfo.sinks.prometheus import DEFAULT_PORT
from diskinfo.sinks.prometheus.exposition import CONTENT_TYPE, process_families, render
from diskinfo.sinks.prometheus.httpd import BoundedHTTPServer, Reply
from diskinfo.sinks.prometheus.render import RecordCollector, _Totals

_INDEX = b"diskinfo exporter: /metrics (Prometheus), /status (node storage pressure, JSON)\n"


class MetricsUnavailable(UserError):
    """The endpoint cannot be served (port taken, not allowed): the monitor goes on without
    it, as with any failing sink; `diskinfo watch` says so."""


class PrometheusSink:
    """Monitor sink that keeps the latest record and serves it over HTTP in its own threads.

    port 0 binds an ephemeral port (tests; read `.port`); the CLI treats 0 as "off". The
    server's limits (threads, deadlines) are `BoundedHTTPServer`'s; `server_options` passes
    other values (tests).
    """

    def __init__(
        self, port: int = DEFAULT_PORT, addr: str = "127.0.0.1", **server_options: Any
    ) -> None:
        if not 0 <= port <= 65535:
            raise UserError(f"metrics port must be 0..65535, got {port}")
        self._lock = threading.Lock()
        self._latest: IntervalRecord | None = None
        self._totals = _Totals()
        self._collector = RecordCollector(self._snapshot)
        try:
            self._server = BoundedHTTPServer(
                addr, port, self._answer, name="diskinfo-metrics", **server_options
            )
        except OSError as exc:
            raise MetricsUnavailable(
                f"cannot serve metrics on {addr}:{port}: {exc.strerror or exc}", exit_code=1
            ) from None
        self.addr = addr
        self.port = int(self._server.server_address[1])

    def _snapshot(self) -> tuple[IntervalRecord | None, _Totals]:
        with self._lock:
            return self._latest, self._totals.copy()

    def status(self) -> dict[str, Any]:
        with self._lock:
            record = self._latest
        return status_document(record, time.time())

    def write(self, record: IntervalRecord) -> None:
        with self._lock:
            self._latest = record
            self._totals.add(record)

    def close(self) -> None:
        self._server.close()

    def metrics(self) -> bytes:
        """The /metrics body: the latest record's families, then the monitor's own process."""
        return render([*self._collector.collect(), *process_families()])

    def _answer(self, method: str, path: str) -> Reply:
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", [("Allow", "GET, HEAD")], b"only GET\n"
        if path == "/metrics":
            return "200 OK", [("Content-Type", CONTENT_TYPE)], self.metrics()
        if path == "/status":
            body = (json.dumps(self.status(), indent=2) + "\n").encode()
            return (
                "200 OK",
                [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                body,
            )
        text = [("Content-Type", "text/plain; charset=utf-8")]
        if path == "/":
            return "200 OK", text, _INDEX
        return "404 Not Found", text, b"not found: try /metrics or /status\n"
