"""GPU figures: a sampler thread reads NVML at >= 10 Hz; each interval is summarised from them.

A 5 s mean of 50% cannot tell a GPU that is half busy from one that runs flat out for half a
second and then waits half a second for data; the summary keeps both apart (minimum, idle
fraction, bursts, pulsing). `summarise` is a pure function of the sample list.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from diskinfo.collectors import BaseCollector
from diskinfo.record import GpuFigures, IntervalRecord
from diskinfo.sources.nvml import GpuSample, Nvml

SAMPLE_HZ = 10.0
PCIE_EVERY = 10  # PCIe throughput costs ~20 ms per read: once per second at 10 Hz
IDLE_UTIL_PCT = 10.0  # a sample below this is idle
BUSY_UTIL_PCT = 80.0  # a sample at or above this is busy


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def pulsing_of(utils: Sequence[float]) -> tuple[float, int]:
    """(pulsing 0..1, bursts). Pulsing = share of samples at either extreme (busy or idle) times
    the balance between them, 2*min/(busy+idle), and 0 unless busy and idle alternate at least
    twice: 1.0 is flat-out half the time and idle the other half, in bursts."""
    states = [
        "busy" if u >= BUSY_UTIL_PCT else "idle"
        for u in utils
        if u >= BUSY_UTIL_PCT or u < IDLE_UTIL_PCT
    ]
    if not states:
        return 0.0, 0
    runs = [states[0]]
    for state in states[1:]:
        if state != runs[-1]:
            runs.append(state)
    bursts = runs.count("busy")
    if len(runs) - 1 < 2:
        return 0.0, bursts if "idle" in runs else 0
    busy = states.count("busy")
    idle = len(states) - busy
    extremes = len(states) / len(utils)
    return extremes * 2 * min(busy, idle) / (busy + idle), bursts


def summarise(index: int, name: str, samples: Sequence[GpuSample]) -> GpuFigures:
    utils = [s.util for s in samples]
    fig = GpuFigures(index=index, name=name, samples=len(samples))
    if not samples:
        return fig
    fig.util_mean = _mean(utils)
    fig.util_min = min(utils)
    fig.util_max = max(utils)
    fig.idle_fraction = sum(1 for u in utils if u < IDLE_UTIL_PCT) / len(utils)
    fig.pulsing, fig.bursts = pulsing_of(utils)
    fig.mem_used_mb = max(s.mem_used_mb for s in samples)
    fig.mem_total_mb = samples[-1].mem_total_mb
    fig.power_w = _mean([s.power_w for s in samples if s.power_w is not None])
    fig.pcie_rx_mb_s = _mean([s.pcie_rx_mb_s for s in samples if s.pcie_rx_mb_s is not None])
    fig.pcie_tx_mb_s = _mean([s.pcie_tx_mb_s for s in samples if s.pcie_tx_mb_s is not None])
    return fig


class GpuCollector(BaseCollector):
    """Owns the sampler thread; `fill` hands the interval's samples to `summarise`."""

    def __init__(
        self,
        hz: float = SAMPLE_HZ,
        open_source: Callable[[], tuple[Nvml | None, str]] = Nvml.open,
    ) -> None:
        super().__init__()
        self.period = 1.0 / hz
        self._open = open_source
        self._nvml: Nvml | None = None
        self._reason = ""
        self._lock = threading.Lock()
        self._samples: list[list[GpuSample]] = []
        self._errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._nvml, self._reason = self._open()
        if self._nvml is None:
            return
        self._samples = [[] for _ in self._nvml.handles]
        self._thread = threading.Thread(target=self._run, name="diskinfo-gpu", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._nvml is not None
        deadline = time.monotonic()
        tick = 0
        while not self._stop.is_set():
            with_pcie = tick % PCIE_EVERY == 0
            for i in range(len(self._nvml.handles)):
                try:
                    sample = self._nvml.sample(i, with_pcie=with_pcie)
                except Exception as exc:  # a GPU falling off the bus must not kill the thread
                    with self._lock:
                        if len(self._errors) < 10:
                            self._errors.append(f"GPU {i}: {exc}")
                    continue
                with self._lock:
                    self._samples[i].append(sample)
            tick += 1
            deadline += self.period
            delay = deadline - time.monotonic()
            if delay < 0:  # fell behind (a slow driver call): skip, do not burst
                deadline = time.monotonic()
                delay = 0.0
            self._stop.wait(delay)

    def fill(self, record: IntervalRecord) -> None:
        if self._nvml is None:
            self.notes.once(f"gpu: no GPU figures ({self._reason}); carrying on")
            self.notes.flush(record)
            record.gpus = None
            return
        with self._lock:
            taken, self._samples = self._samples, [[] for _ in self._samples]
            errors, self._errors = self._errors, []
        record.gpus = [
            summarise(i, self._nvml.names[i], samples) for i, samples in enumerate(taken)
        ]
        record.warnings.extend(f"gpu: {e}" for e in dict.fromkeys(errors))

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._nvml is not None:
            self._nvml.close()
