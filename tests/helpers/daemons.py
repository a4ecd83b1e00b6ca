"""Daemons a system test starts (slurmctld, slurmd, munged, Prometheus, Alertmanager), each
logging to its own file in one folder, and stopped last-started first: a daemon ends before
the ones it talks to, so its own shutdown is not a flood of connection errors."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path


class Daemons:
    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[subprocess.Popen] = []

    def start(self, name: str, argv: list[str], **kw) -> subprocess.Popen:
        out = open(self.logs / f"{name}.log", "w")  # noqa: SIM115 (lives as long as the daemon)
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, **kw)
        self.procs.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.logs / f"{name}.log").read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
