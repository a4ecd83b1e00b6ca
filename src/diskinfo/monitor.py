"""The sampling loop: collectors read, the analyser decides, sinks write, once per interval.

Scheduling is by absolute monotonic deadlines, so a late wake-up shortens the next sleep
instead of shifting every later sample; each record carries the elapsed time actually
measured, which is what every rate is divided by.
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from diskinfo.record import IntervalRecord, Verdict


class Collector(Protocol):
    """Reads one source and fills its own part of the record. Never raises for bad data:
    it records a warning in `record.warnings` and leaves its part empty instead."""

    def start(self) -> None: ...

    def fill(self, record: IntervalRecord) -> None: ...

    def stop(self) -> None: ...

    # Optional: `unsaid() -> bool`, whether it holds news no record has carried yet (how the
    # training command ended); the monitor then writes one last, shorter interval at its stop.


class Sink(Protocol):
    """Writes records somewhere. A failing sink warns once and keeps the loop alive."""

    def write(self, record: IntervalRecord) -> None: ...

    def close(self) -> None: ...


Analyser = Callable[[IntervalRecord], "Verdict | None"]


class Monitor:
    def __init__(
        self,
        interval: float,
        collectors: Sequence[Collector],
        sinks: Sequence[Sink],
        analyser: Analyser | None = None,
        count: int | None = None,
    ) -> None:
        if not interval > 0:
            raise ValueError("interval must be > 0")
        self.interval = interval
        self.collectors = list(collectors)
        self.sinks = list(sinks)
        self.analyser = analyser
        self.count = count
        # a plain lock held until stop(): waiting on it with a timeout is one futex call per
        # interval, where threading.Event's Condition costs about 40 us more of Python per wake
        self._stopped = False
        self._wake = threading.Lock()
        self._wake.acquire()
        self._host = socket.gethostname()
        self._started = time.time()

    def stop(self, *_: object) -> None:
        """End the loop (from a signal handler or another thread): the wait returns at once."""
        if not self._stopped:
            self._stopped = True
            self._wake.release()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT end the loop at once (one last, shorter interval is written when a
        collector has news for it): exit 0."""
        signal.signal(signal.SIGTERM, self.stop)
        signal.signal(signal.SIGINT, self.stop)

    def run(self) -> int:
        for collector in self.collectors:
            collector.start()
        try:
            last = time.monotonic()
            deadline = last + self.interval
            done = 0
            while not self._stopped:
                if self._wake.acquire(True, max(0.0, deadline - time.monotonic())):
                    # stop() released it: the time since the last interval is written too when
                    # a collector holds news, or a run's end would be in no record
                    if any(getattr(c, "unsaid", bool)() for c in self.collectors):
                        self._emit(time.monotonic() - last)
                    break
                now = time.monotonic()
                # skip whole missed intervals (suspend, long stall) instead of bursting
                missed = int((now - deadline) // self.interval)
                deadline += self.interval * (missed + 1)
                self._emit(now - last)
                last = now
                done += 1
                if self.count is not None and done >= self.count:
                    break
        finally:
            for collector in self.collectors:
                collector.stop()
            for sink in self.sinks:
                sink.close()
        return 0

    def _emit(self, elapsed: float) -> None:
        record = IntervalRecord(
            ts=time.time(), elapsed_s=elapsed, host=self._host, started=self._started
        )
        for collector in self.collectors:
            try:
                collector.fill(record)
            except Exception as exc:  # a broken source must not stop the monitor
                record.warnings.append(f"{type(collector).__name__}: {exc}")
        if self.analyser is not None:
            try:
                record.verdict = self.analyser(record)
            except Exception as exc:
                record.warnings.append(f"analysis: {exc}")
        for sink in self.sinks:
            try:
                sink.write(record)
            except Exception as exc:
                print(f"diskinfo: warning: sink {type(sink).__name__}: {exc}", file=sys.stderr)
