"""Thin NVML reader (nvidia-ml-py): one sample of one GPU; everything else lives elsewhere.

`Nvml.open()` either returns a reader or a one-line reason why there are no GPU figures
(no nvidia-ml-py, no libnvidia-ml.so in the container, no GPU visible), so the monitor can say
so once and carry on. PCIe throughput takes ~20 ms per call inside the driver, so callers read
it less often than utilisation.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuSample:
    t: float  # monotonic seconds
    util: float  # percent: share of time a kernel was running over NVML's sample period
    mem_used_mb: float
    mem_total_mb: float
    power_w: float | None = None
    pcie_rx_mb_s: float | None = None  # None where not read in this sample
    pcie_tx_mb_s: float | None = None


class Nvml:
    def __init__(self, nvml: Any, handles: list[Any], names: list[str]) -> None:
        self._nvml = nvml
        self.handles = handles
        self.names = names

    @classmethod
    def open(cls) -> tuple[Nvml | None, str]:
        try:
            import pynvml  # nvidia-ml-py
        except ImportError:
            return None, "nvidia-ml-py is not installed"
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            names = []
            for handle in handles:
                name = pynvml.nvmlDeviceGetName(handle)
                names.append(name.decode() if isinstance(name, bytes) else str(name))
        except pynvml.NVMLError as exc:
            return None, f"NVML unavailable: {exc}"
        if not handles:
            pynvml.nvmlShutdown()
            return None, "NVML sees no GPU"
        return cls(pynvml, handles, names), ""

    def sample(self, index: int, with_pcie: bool = False) -> GpuSample:
        nv = self._nvml
        handle = self.handles[index]
        util = nv.nvmlDeviceGetUtilizationRates(handle).gpu
        mem = nv.nvmlDeviceGetMemoryInfo(handle)
        try:
            power = nv.nvmlDeviceGetPowerUsage(handle) / 1000.0  # mW
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
            util=float(util),
            mem_used_mb=mem.used / 2**20,
            mem_total_mb=mem.total / 2**20,
            power_w=power,
            pcie_rx_mb_s=rx,
            pcie_tx_mb_s=tx,
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()
