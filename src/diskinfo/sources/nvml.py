"""Thin NVML reader (nvidia-ml-py): one sample of one GPU; everything else lives elsewhere.

`Nvml.open()` either returns a reader or a one-line reason why there are no GPU figures
(no nvidia-ml-py, no libnvidia-ml.so in the container, a driver/library mismatch, no GPU
visible), so the monitor can say so once and carry on. PCIe throughput takes ~20 ms per call
inside the driver, so callers read it less often than utilisation.

NVML's utilisation is the share of time a kernel ran over the driver's own sample period (1 s
to 1/6 s depending on the product). Where the driver keeps its timestamped samples
(`nvmlDeviceGetSamples`), `utilisation_samples` returns those, each exactly once, so polling
faster than the period does not count one window several times.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import Any

# NVML's return codes (nvml.h), the ones the monitor treats apart
NOT_SUPPORTED = 3  # e.g. utilisation of a MIG-enabled GPU
NOT_FOUND = 6  # nvmlDeviceGetSamples: no sample newer than the one asked after
GPU_IS_LOST = 15  # fell off the bus
LIB_RM_VERSION_MISMATCH = 18  # the library is not the loaded kernel driver's version
UTILIZATION_SAMPLES = 1  # NVML_GPU_UTILIZATION_SAMPLES
INIT_PID_NAMESPACE = "pid:[4026531836]"  # PROC_PID_INIT_INO: the host's PID namespace


class GpuLost(Exception):
    """The GPU fell off the bus: no figure of it will come again in this run."""


@dataclass(frozen=True)
class GpuSample:
    t: float  # monotonic seconds
    util: float | None  # percent over NVML's sample period; None: not supported (MIG)
    mem_used_mb: float
    mem_total_mb: float
    power_w: float | None = None
    pcie_rx_mb_s: float | None = None  # None where not read in this sample
    pcie_tx_mb_s: float | None = None


def error_code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def open_failure(code: int | None, text: str) -> str:
    """One line for the log: why there are no GPU figures in this run."""
    if code == LIB_RM_VERSION_MISMATCH:
        return (
            f"NVML unavailable: the NVIDIA library does not match the loaded driver ({text}); "
            "the container's libnvidia-ml must come from the host's driver"
        )
    return f"NVML unavailable: {text}"


def pids_are_ours(pid_namespace: str | None = None) -> bool:
    """NVML lists processes by their PID in the host's namespace: they are this process's PIDs
    only where it runs in that namespace (on the host, or a container started --pid=host)."""
    if pid_namespace is None:
        try:
            pid_namespace = os.readlink("/proc/self/ns/pid")
        except OSError:
            return False
    return pid_namespace == INIT_PID_NAMESPACE


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Nvml:
    def __init__(
        self, nvml: Any, handles: list[Any], names: list[str], uuids: list[str] | None = None
    ) -> None:
        self._nvml = nvml
        self.handles = handles
        self.names = names
        self.uuids = uuids if uuids is not None else [""] * len(handles)
        self._last_seen = [0] * len(handles)  # driver timestamp (us) of the last sample taken

    @classmethod
    def open(cls) -> tuple[Nvml | None, str]:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            return None, "nvidia-ml-py is not installed"
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            return None, open_failure(error_code(exc), str(exc))
        try:
            count = pynvml.nvmlDeviceGetCount()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            names = [_text(pynvml.nvmlDeviceGetName(h)) for h in handles]
            uuids = []
            for handle in handles:
                try:
                    uuids.append(_text(pynvml.nvmlDeviceGetUUID(handle)))
                except pynvml.NVMLError:
                    uuids.append("")
        except pynvml.NVMLError as exc:
            with contextlib.suppress(Exception):
                pynvml.nvmlShutdown()
            return None, open_failure(error_code(exc), str(exc))
        if not handles:
            pynvml.nvmlShutdown()
            return None, "NVML sees no GPU"
        return cls(pynvml, handles, names, uuids), ""

    def _call(self, fn: Any, *args: Any) -> Any:
        """A call whose failure with GPU_IS_LOST means the GPU is gone for this run."""
        try:
            return fn(*args)
        except self._nvml.NVMLError as exc:
            if error_code(exc) == GPU_IS_LOST:
                raise GpuLost(str(exc)) from None
            raise

    def sample(self, index: int, with_pcie: bool = False, with_util: bool = True) -> GpuSample:
        """Utilisation (None where NOT_SUPPORTED, as on a MIG-enabled GPU), memory, power and
        PCIe. GpuLost for a GPU that fell off the bus; other NVMLErrors as raised."""
        nv = self._nvml
        handle = self.handles[index]
        util: float | None = None
        if with_util:
            try:
                util = float(self._call(nv.nvmlDeviceGetUtilizationRates, handle).gpu)
            except nv.NVMLError as exc:
                if error_code(exc) != NOT_SUPPORTED:
                    raise
        mem = self._call(nv.nvmlDeviceGetMemoryInfo, handle)
        try:
            power = self._call(nv.nvmlDeviceGetPowerUsage, handle) / 1000.0  # mW
        except nv.NVMLError:
            power = None
        rx = tx = None
        if with_pcie:
            try:  # KB/s over a 20 ms window
                rx = nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_RX_BYTES) / 1024.0
                tx = nv.nvmlDeviceGetPcieThroughput(handle, nv.NVML_PCIE_UTIL_TX_BYTES) / 1024.0
            except nv.NVMLError:
                rx = tx = None
        return GpuSample(
            t=time.monotonic(),
            util=util,
            mem_used_mb=mem.used / 2**20,
            mem_total_mb=mem.total / 2**20,
            power_w=power,
            pcie_rx_mb_s=rx,
            pcie_tx_mb_s=tx,
        )

    def utilisation_samples(self, index: int) -> list[tuple[int, float]]:
        """The driver's own utilisation samples newer than the last ones returned, as
        (timestamp in microseconds, percent). An empty list: none new yet. NVMLError where the
        driver keeps none (NOT_SUPPORTED): the caller polls nvmlDeviceGetUtilizationRates."""
        nv = self._nvml
        try:
            _kind, samples = self._call(
                nv.nvmlDeviceGetSamples,
                self.handles[index],
                UTILIZATION_SAMPLES,
                self._last_seen[index],
            )
        except nv.NVMLError as exc:
            if error_code(exc) == NOT_FOUND:
                return []
            raise
        out = [
            (int(s.timeStamp), float(s.sampleValue.uiVal))
            for s in samples
            if int(s.timeStamp) > self._last_seen[index]
        ]
        if out:
            self._last_seen[index] = max(ts for ts, _ in out)
        return sorted(out)

    def processes(self, index: int) -> list[int] | None:
        """PIDs (the host's PID namespace) with a compute or graphics context on the GPU; None
        where the driver does not say."""
        nv = self._nvml
        pids: list[int] = []
        said = False
        for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            try:
                pids += [int(p.pid) for p in self._call(getattr(nv, fn), self.handles[index])]
                said = True
            except (nv.NVMLError, AttributeError):
                continue
        return sorted(set(pids)) if said else None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()
