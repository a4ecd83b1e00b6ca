"""GPU figures: a sampler thread reads NVML at >= 10 Hz; each interval is summarised from them.

A 5 s mean of 50% cannot tell a GPU that is half busy from one that runs flat out for half a
second and then waits half a second for data; the summary keeps both apart (minimum, idle
fraction, bursts, pulsing). `summarise` is a pure function of the sample list.

Utilisation comes from the driver's own timestamped samples where it keeps them
(`nvmlDeviceGetSamples`): each window of the driver's sample period (1/6 s to 1 s) counts
once, however often it is polled. Elsewhere, and in an interval the driver kept none of,
`nvmlDeviceGetUtilizationRates` polled at SAMPLE_HZ stands in, and a period longer than 0.1 s
is read several times (docs/gpu.md).

A GPU whose utilisation is not supported (MIG) keeps its memory and power figures and is not
judged; a GPU that falls off the bus is said once and left alone; each said once in the log.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence

from diskinfo.collectors import BaseCollector
from diskinfo.collectors.training_gpus import Hints, mark
from diskinfo.record import GpuFigures, IntervalRecord
from diskinfo.sources import nvml as nvml_source
from diskinfo.sources.nvml import GpuLost, GpuSample, Nvml
from diskinfo.thresholds import GPU_SAMPLE_BUSY_PCT as BUSY_UTIL_PCT
from diskinfo.thresholds import GPU_SAMPLE_IDLE_PCT as IDLE_UTIL_PCT

SAMPLE_HZ = 10.0
PCIE_EVERY = 10  # PCIe throughput costs ~20 ms per read: once per second at 10 Hz


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


def summarise(
    index: int,
    name: str,
    samples: Sequence[GpuSample],
    driver_utils: Sequence[float] | None = None,
) -> GpuFigures:
    """`driver_utils`: the driver's own samples of the interval, where it keeps them; else the
    utilisation polled with each sample."""
    utils = (
        list(driver_utils)
        if driver_utils is not None
        else [s.util for s in samples if s.util is not None]
    )
    fig = GpuFigures(index=index, name=name, samples=len(utils))
    if samples:
        fig.mem_used_mb = max(s.mem_used_mb for s in samples)
        fig.mem_total_mb = samples[-1].mem_total_mb
        fig.power_w = _mean([s.power_w for s in samples if s.power_w is not None])
    if not utils:
        return fig
    fig.util_mean = _mean(utils)
    fig.util_min = min(utils)
    fig.util_max = max(utils)
    fig.idle_fraction = sum(1 for u in utils if u < IDLE_UTIL_PCT) / len(utils)
    fig.pulsing, fig.bursts = pulsing_of(utils)
    fig.pcie_rx_mb_s = _mean([s.pcie_rx_mb_s for s in samples if s.pcie_rx_mb_s is not None])
    fig.pcie_tx_mb_s = _mean([s.pcie_tx_mb_s for s in samples if s.pcie_tx_mb_s is not None])
    return fig


class GpuCollector(BaseCollector):
    """Owns the sampler thread; `fill` hands the interval's samples to `summarise` and marks the
    GPUs the training uses. It runs after the process and loader collectors, whose figures
    (the training's PIDs, the wrapper's device UUIDs) say which GPUs those are."""

    def __init__(
        self,
        hz: float = SAMPLE_HZ,
        open_source: Callable[[], tuple[Nvml | None, str]] = Nvml.open,
        pids_are_ours: Callable[[], bool] = nvml_source.pids_are_ours,
    ) -> None:
        super().__init__()
        self.period = 1.0 / hz
        self._open = open_source
        self._pids_are_ours = pids_are_ours
        self._nvml: Nvml | None = None
        self._reason = ""
        self._lock = threading.Lock()
        self._samples: list[list[GpuSample]] = []
        self._driver: list[list[float]] = []  # the driver's own utilisation samples
        self._state: list[str] = []  # per GPU: "" sampled, "no-utilisation", "lost"
        self._from_driver: list[bool] = []  # utilisation from nvmlDeviceGetSamples
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._nvml, self._reason = self._open()
        if self._nvml is None:
            return
        n = len(self._nvml.handles)
        self._samples = [[] for _ in range(n)]
        self._driver = [[] for _ in range(n)]
        self._state = [""] * n
        self._from_driver = [True] * n
        for i in range(n):  # the driver's history before this run is not this run's
            self._driver_samples(i)
        self._thread = threading.Thread(target=self._run, name="diskinfo-gpu", daemon=True)
        self._thread.start()

    def _label(self, i: int) -> str:
        assert self._nvml is not None
        return f"GPU {i} ({self._nvml.names[i]})"

    def _driver_samples(self, i: int) -> list[float] | None:
        """This GPU's new driver samples; None once the driver has said it keeps none."""
        assert self._nvml is not None
        if not self._from_driver[i]:
            return None
        try:
            return [u for _ts, u in self._nvml.utilisation_samples(i)]
        except GpuLost:
            raise
        except Exception:  # NOT_SUPPORTED, an old driver, a library without the call: poll
            self._from_driver[i] = False
            return None

    def _sample(self, i: int, with_pcie: bool) -> None:
        assert self._nvml is not None
        state = self._state[i]
        driver = self._driver_samples(i) if not state else None
        # polled even where the driver keeps samples: an interval it kept none of (a driver
        # that stops sampling an idle GPU) is summarised from these instead
        sample = self._nvml.sample(i, with_pcie=with_pcie, with_util=not state)
        if not state and sample.util is None:
            self._state[i] = "no-utilisation"
            self.notes.once(
                f"gpu: {self._label(i)}: utilisation not supported (a MIG-enabled GPU); its "
                "memory and power are shown, the verdict goes by the training loop's figures"
            )
        with self._lock:
            self._samples[i].append(sample)
            if driver:
                self._driver[i].extend(driver)

    def _run(self) -> None:
        assert self._nvml is not None
        deadline = time.monotonic()
        tick = 0
        while not self._stop.is_set():
            with_pcie = tick % PCIE_EVERY == 0
            for i in range(len(self._nvml.handles)):
                if self._state[i] == "lost":
                    continue
                try:
                    self._sample(i, with_pcie)
                except GpuLost as exc:
                    self._state[i] = "lost"
                    self.notes.once(
                        f"gpu: {self._label(i)} is lost ({exc}): no more figures of it in "
                        "this run; the monitor and the training carry on"
                    )
                except Exception as exc:  # any other driver error must not kill the thread
                    self.notes.once(f"gpu: {self._label(i)}: {exc}")
            tick += 1
            deadline += self.period
            delay = deadline - time.monotonic()
            if delay < 0:  # fell behind (a slow driver call): skip, do not burst
                deadline = time.monotonic()
                delay = 0.0
            self._stop.wait(delay)

    def hints(self, record: IntervalRecord) -> Hints:
        assert self._nvml is not None
        nvml_pids: dict[int, list[int] | None] = {}
        for i in range(len(self._nvml.handles)):
            if self._state[i] != "lost":
                try:
                    nvml_pids[i] = self._nvml.processes(i)
                except Exception:  # lost in between: the sampler says so
                    nvml_pids[i] = None
        return Hints(
            wrapper_uuids=record.loader.gpu_uuids if record.loader is not None else (),
            tree_pids=[p.pid for p in record.procs],
            nvml_pids=nvml_pids,
            pids_are_ours=self._pids_are_ours(),
            # the container's setting, which the training command inherits: the monitor never
            # reads another process's environment (where the user's secrets are)
            visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        )

    def fill(self, record: IntervalRecord) -> None:
        if self._nvml is None:
            self.notes.once(f"gpu: no GPU figures ({self._reason}); carrying on")
            self.notes.flush(record)
            record.gpus = None
            return
        with self._lock:
            taken, self._samples = self._samples, [[] for _ in self._samples]
            driver, self._driver = self._driver, [[] for _ in self._driver]
        gpus = []
        for i, samples in enumerate(taken):
            fig = summarise(i, self._nvml.names[i], samples, driver[i] or None)
            fig.uuid = self._nvml.uuids[i]
            fig.state = self._state[i]
            gpus.append(fig)
        mark(gpus, self.hints(record))
        record.gpus = gpus
        self.notes.flush(record)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._nvml is not None:
            self._nvml.close()
