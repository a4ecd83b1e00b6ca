"""A stand-in for a node's metrics port taken by someone else: it answers `/status` with what a
test chooses, a flood, or a trickle, the attacks a consumer of `/status` must survive."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class HostileMonitor:
    """`mode`: "json" (answer `doc`), "flood" (`flood_bytes` of a JSON-looking body, then
    close), "trickle" (headers, then one byte every `pace` s for `trickle_s` s)."""

    def __init__(
        self,
        mode: str,
        doc: dict[str, Any] | None = None,
        flood_bytes: int = 300 << 20,
        pace: float = 0.5,
        trickle_s: float = 20.0,
    ) -> None:
        self.mode, self.doc, self.flood_bytes = mode, doc or {}, flood_bytes
        self.pace, self.trickle_s = pace, trickle_s
        self.sent = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/status"

    def __enter__(self) -> HostileMonitor:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        monitor = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: object) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if monitor.mode == "json":
                    body = json.dumps(monitor.doc).encode()
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.end_headers()
                self.wfile.flush()
                try:
                    if monitor.mode == "flood":
                        self.wfile.write(b'{"pressure": "saturated", "x": "')
                        chunk = b"x" * (1 << 20)
                        while monitor.sent < monitor.flood_bytes:
                            self.wfile.write(chunk)
                            monitor.sent += len(chunk)
                        self.wfile.write(b'"}')
                    else:
                        body = json.dumps({"pressure": "saturated"}).encode()
                        end = time.monotonic() + monitor.trickle_s
                        for i in range(10**6):
                            if time.monotonic() > end:
                                break
                            self.wfile.write(body[i % len(body) : i % len(body) + 1])
                            self.wfile.flush()
                            monitor.sent += 1
                            time.sleep(monitor.pace)
                except OSError:  # the consumer gave up: what it should do
                    pass

        return Handler


def run_measured(
    argv: list[str], env: dict[str, str] | None = None, timeout: float = 40
) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run a consumer: its result, the seconds it took and its own peak memory in MiB (wait4's
    rusage of that one child: RUSAGE_CHILDREN would be the largest of every child so far)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.monotonic()
        proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, text=True)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        elapsed = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read())
    return done, elapsed, usage.ru_maxrss / 1024
