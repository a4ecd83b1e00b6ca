"""What every part shares: names, exit codes, tolerances and the result types (stdlib only)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

PROG = "validate-cuda"
DEFAULT_CUDA = "11.8"
DEFAULT_REPORT = Path("/workspace/logs/validate-cuda.json")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3
PASS, FAIL, SKIP = "pass", "fail", "skip"

# Relative (Frobenius) error allowed against a float64 CPU reference. Broken kernels are off by
# O(1); each bound leaves 5-10x headroom over the rounding error of its number format.
TOLERANCE: dict[str, float] = {
    "fp32-cpu": 1e-4,
    "fp32": 1e-3,  # TF32 off; cuDNN may still pick Winograd or FFT algorithms
    "tf32": 5e-3,  # 10-bit mantissa inputs
    "fp16": 1e-2,
    "bf16": 3e-2,  # 7-bit mantissa
}
MATMUL_DTYPES = ("bf16", "fp16", "tf32")
H2D_BYTES = 256 << 20
ALLREDUCE_NUMEL = 1 << 20
FAULTS = ("allreduce", "conv")

GPU_CHECKS = (
    "torch",
    "driver",
    "cuda_available",
    "gpu_arch",
    "cuda_version",
    "cudnn_conv2d",
    "nccl_allreduce",
    *(f"matmul_{d}" for d in MATMUL_DTYPES),
    "h2d_pageable",
    "h2d_pinned",
    "gpu_memory",
    "dataloader_pinned",
)
CPU_CHECKS = ("torch", "conv2d_cpu", "gloo_allreduce", "dataloader_workers")


class UsageError(Exception):
    """Bad options or environment: one line on stderr, exit 2."""


@dataclasses.dataclass
class CheckResult:
    """One named check: what a reader of the table or the JSON report needs, nothing more."""

    name: str
    status: str  # PASS, FAIL or SKIP
    detail: str
    value: float | int | str | None = None
    unit: str = ""
    data: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class DriverInfo:
    version: str | None  # e.g. "535.104.05"
    source: str  # where the version was read
    cuda: str | None = None  # newest CUDA the driver supports, e.g. "12.2"


@dataclasses.dataclass
class MemoryResult:
    device: int
    free: int
    total: int
    target: int
    allocated: int
    verified: bool
    error: str = ""


@dataclasses.dataclass
class LoaderResult:
    batches: int
    expected_batches: int
    wrong: list[str]
    unpinned: int
    seconds: float
    samples: int


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else 'no message'}"
