"""A stand-in for a node's metrics port taken by someone else: it answers `/status` with what a
test chooses, a flood, or a trickle, the attacks a consumer of `/status` must survive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
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


# Linux keeps a process's peak RSS across execve, so a consumer forked straight from a
# pytest that has loaded torch reports pytest's 800 MiB as its own. A small Python forks it
# instead and writes the wait4 rusage of that one child to the file in argv[1].
_MEASURE = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
sys.exit(os.waitstatus_to_exitcode(status) % 256)
"""


def run_measured(
    argv: list[str], env: dict[str, str] | None = None, timeout: float = 40
) -> tuple[subprocess.CompletedProcess[str], float, float]:
    """Run a consumer: its result, the seconds it took and its own peak memory in MiB."""
    with (
        tempfile.TemporaryFile("w+") as out,
        tempfile.TemporaryFile("w+") as err,
        tempfile.NamedTemporaryFile("r") as peak,
    ):
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", _MEASURE, peak.name, *argv],
            env=env,
            stdout=out,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        elapsed = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        kib = int(peak.read() or 0)
        done = subprocess.CompletedProcess(argv, proc.returncode, out.read(), err.read())
    return done, elapsed, kib / 1024
