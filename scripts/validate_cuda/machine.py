"""Reading the machine: the driver, torch, /dev/shm and the environment for the report."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

try:  # the image's diskinfo (or a checkout's, scripts/validate-cuda): what it measures, here too
    from diskinfo import cores
    from diskinfo.sources import shm
except ImportError:  # a host with PyTorch and without diskinfo
    cores = shm = None  # type: ignore[assignment]

from .common import FAIL, PASS, CheckResult, DriverInfo, first_line
from .drivers import format_cuda_api_version, parse_proc_driver_version, parse_smi_driver_version
from .judge import format_cudnn_version, format_nccl_version


def read_driver() -> DriverInfo:
    """The driver version from the first source that has it; NVML and libcuda also say its CUDA."""
    version, source, cuda = None, "none", None
    with contextlib.suppress(Exception):
        import pynvml  # optional: nvidia-ml-py

        pynvml.nvmlInit()
        try:
            raw = pynvml.nvmlSystemGetDriverVersion()
            version = raw.decode() if isinstance(raw, bytes) else str(raw)
            source = "NVML"
            cuda = format_cuda_api_version(int(pynvml.nvmlSystemGetCudaDriverVersion()))
        finally:
            pynvml.nvmlShutdown()
    if version is None:
        with contextlib.suppress(OSError):
            version = parse_proc_driver_version(Path("/proc/driver/nvidia/version").read_text())
            source = "/proc/driver/nvidia/version" if version else source
    if version is None and shutil.which("nvidia-smi"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout
            version = parse_smi_driver_version(out)
            source = "nvidia-smi" if version else source
    if cuda is None:
        with contextlib.suppress(OSError, AttributeError):
            libcuda = ctypes.CDLL("libcuda.so.1")
            value = ctypes.c_int(0)
            if libcuda.cuDriverGetVersion(ctypes.byref(value)) == 0 and value.value:
                cuda = format_cuda_api_version(value.value)
                source = source if version else "libcuda"
    return DriverInfo(version, source, cuda)


def import_torch() -> tuple[Any, CheckResult]:
    try:
        import torch
    except Exception as exc:  # a broken install raises more than ImportError
        return None, CheckResult("torch", FAIL, f"cannot import torch: {first_line(exc)}")
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    dist = torch.distributed.is_available()
    parts = [
        f"torch {torch.__version__}",
        f"CUDA build {torch.version.cuda or 'none'}",
        f"cuDNN {format_cudnn_version(cudnn) if cudnn else 'none'}",
        f"Python {platform.python_version()}",
        f"gloo {'yes' if dist and torch.distributed.is_gloo_available() else 'no'}",
        f"nccl {'yes' if dist and torch.distributed.is_nccl_available() else 'no'}",
    ]
    return torch, CheckResult("torch", PASS, ", ".join(parts), torch.__version__)


def shm_size() -> str:
    size = shm.size_mb() if shm is not None else None
    return f"{size:.0f} MiB" if size is not None else "unknown"


def environment(torch: Any, driver: DriverInfo | None) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "dev_shm": shm_size(),
        # what the monitor's verdict and `diskinfo tune` count: quota, cpuset, host
        "cores": cores.available() if cores is not None else None,
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    if driver:
        env["driver"] = dataclasses.asdict(driver)
    if torch is None:
        return env
    env["torch"] = torch.__version__
    env["torch_cuda"] = torch.version.cuda
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    env["cudnn"] = format_cudnn_version(cudnn) if cudnn else None
    if torch.cuda.is_available():
        env["nccl"] = nccl_version(torch)
        env["gpus"] = [
            {
                "index": i,
                "name": torch.cuda.get_device_name(i),
                "capability": "{}.{}".format(*torch.cuda.get_device_capability(i)),
                "memory_gib": round(
                    torch.cuda.get_device_properties(i).total_memory / (1 << 30), 1
                ),
            }
            for i in range(torch.cuda.device_count())
        ]
    return env


def nccl_version(torch: Any) -> str | None:
    with contextlib.suppress(Exception):
        return format_nccl_version(torch.cuda.nccl.version())
    return None
