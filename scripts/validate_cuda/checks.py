"""The checks: each runs its measurement, guarded, and hands the numbers to its judge."""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from typing import Any

from .common import (
    FAIL,
    GPU_CHECKS,
    H2D_BYTES,
    MATMUL_DTYPES,
    SKIP,
    CheckResult,
    DriverInfo,
    first_line,
)
from .judge import (
    format_cudnn_version,
    judge_allreduce,
    judge_bandwidth,
    judge_conv,
    judge_cuda_available,
    judge_cuda_version,
    judge_dataloader,
    judge_driver,
    judge_gpu_arch,
    judge_matmul,
    judge_memory,
    normalize_cuda_version,
    shm_hint,
)
from .machine import nccl_version, shm_size
from .measure import (
    allocate_most,
    conv_errors,
    h2d_measure,
    matmul_measure,
    run_allreduce,
    run_dataloader,
    tf32,
)
from .report import Table


def guarded(name: str, fn: Callable[[], CheckResult]) -> CheckResult:
    """An exception in a measurement is that check's failure, reported in one line."""
    try:
        return fn()
    except Exception as exc:
        return CheckResult(name, FAIL, shm_hint(first_line(exc)))


def check_cudnn(torch: Any, fault: bool) -> CheckResult:
    if not torch.backends.cudnn.is_available():
        return CheckResult("cudnn_conv2d", FAIL, "cuDNN is not available to torch")
    version = f"cuDNN {format_cudnn_version(torch.backends.cudnn.version())}"
    runs = []
    old = torch.backends.cudnn.enabled
    torch.backends.cudnn.enabled = True
    try:
        for mode in ("tf32", "fp32"):
            with tf32(torch, mode == "tf32"):
                runs.append((mode, conv_errors(torch, "cuda", fault)))
    finally:
        torch.backends.cudnn.enabled = old
    return judge_conv("cudnn_conv2d", "cuda with cuDNN", runs, version)


def check_allreduce(
    torch: Any, backend: str, world_size: int, timeout_s: float, fault: bool
) -> CheckResult:
    name = "nccl_allreduce" if backend == "nccl" else "gloo_allreduce"
    available = torch.distributed.is_available() and (
        torch.distributed.is_nccl_available()
        if backend == "nccl"
        else torch.distributed.is_gloo_available()
    )
    if not available:
        return CheckResult(name, FAIL, f"torch.distributed has no {backend} backend in this build")
    library = f"NCCL {nccl_version(torch)}" if backend == "nccl" else None
    per_rank, error = run_allreduce(backend, world_size, timeout_s, world_size - 1 if fault else -1)
    error = shm_hint(error) if error else None
    return judge_allreduce(name, backend, world_size, per_rank, error, library)


def check_matmul(torch: Any, dtype: str, n: int) -> CheckResult:
    tflops, error = matmul_measure(torch, dtype, n)
    major = torch.cuda.get_device_capability(0)[0]
    note = ""
    if dtype == "tf32" and major < 8:
        note = "this GPU (before sm_80) has no TF32: this is plain FP32"
    if dtype == "bf16" and major < 8:
        note = "this GPU (before sm_80) has no bf16 tensor cores"
    return judge_matmul(dtype, tflops, error, n, note)


def check_conv_cpu(torch: Any, fault: bool) -> CheckResult:
    errors = conv_errors(torch, "cpu", fault)
    return judge_conv("conv2d_cpu", "cpu", [("fp32-cpu", errors)], None)


def check_h2d(torch: Any, pinned: bool) -> CheckResult:
    return judge_bandwidth(pinned, *h2d_measure(torch, pinned, H2D_BYTES), H2D_BYTES)


def check_memory(torch: Any, count: int, fraction: float) -> CheckResult:
    return judge_memory([allocate_most(torch, i, fraction) for i in range(count)], fraction)


def check_dataloader(torch: Any, on_gpu: bool, workers: int = 2) -> CheckResult:
    shm = f"/dev/shm {shm_size()}"
    if on_gpu:
        result = run_dataloader(torch, "cuda", True, workers)
        return judge_dataloader("dataloader_pinned", result, workers, True, shm)
    result = run_dataloader(torch, "cpu", False, workers)
    note = f"pin_memory needs a GPU, not exercised; {shm}"
    return judge_dataloader("dataloader_workers", result, workers, False, note)


def gpu_checks(
    torch: Any,
    torch_check: CheckResult,
    driver: DriverInfo,
    args: argparse.Namespace,
    expected: tuple[str, str],
    table: Table,
) -> list[CheckResult]:
    results: list[CheckResult] = []

    def add(result: CheckResult) -> None:
        results.append(result)
        table.row(result)

    add(torch_check)
    torch_cuda = torch.version.cuda
    why = "torch's build" if torch_cuda else f"expected, from {expected[1]}"
    add(judge_driver(driver, normalize_cuda_version(torch_cuda or "") or expected[0], why))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
    note = "; ".join(first_line(w.message) for w in caught)  # e.g. "driver too old (found 11040)"
    count = torch.cuda.device_count() if available else 0
    names = [torch.cuda.get_device_name(i) for i in range(count)]
    caps = [tuple(torch.cuda.get_device_capability(i)) for i in range(count)]
    labels = [f"{name} (sm_{c[0]}{c[1]})" for name, c in zip(names, caps, strict=True)]
    add(judge_cuda_available(available, labels, torch.__version__, torch_cuda, note))
    needs_gpu = "needs a working CUDA device (see cuda_available)"
    if available and count:
        add(judge_gpu_arch(caps, names, torch.cuda.get_arch_list()))
    else:
        add(CheckResult("gpu_arch", SKIP, needs_gpu))
    add(judge_cuda_version(torch_cuda, torch.__version__, *expected))
    if not (available and count):
        done = {r.name for r in results}
        for name in GPU_CHECKS:
            if name not in done:
                add(CheckResult(name, SKIP, needs_gpu))
        return results
    fault = args.inject_fault
    steps: list[tuple[str, Callable[[], CheckResult]]] = [
        ("cudnn_conv2d", lambda: check_cudnn(torch, fault == "conv")),
        (
            "nccl_allreduce",
            lambda: check_allreduce(torch, "nccl", count, args.timeout, fault == "allreduce"),
        ),
        *(
            (f"matmul_{d}", lambda d=d: check_matmul(torch, d, args.matmul_size))
            for d in MATMUL_DTYPES
        ),
        ("h2d_pageable", lambda: check_h2d(torch, pinned=False)),
        ("h2d_pinned", lambda: check_h2d(torch, pinned=True)),
        ("gpu_memory", lambda: check_memory(torch, count, args.memory_fraction)),
        ("dataloader_pinned", lambda: check_dataloader(torch, on_gpu=True)),
    ]
    for name, fn in steps:
        add(guarded(name, fn))
    return results


def cpu_checks(
    torch: Any, torch_check: CheckResult, args: argparse.Namespace, table: Table
) -> list[CheckResult]:
    results = [torch_check]
    table.row(torch_check)
    fault = args.inject_fault
    steps: list[tuple[str, Callable[[], CheckResult]]] = [
        ("conv2d_cpu", lambda: check_conv_cpu(torch, fault == "conv")),
        (
            "gloo_allreduce",
            lambda: check_allreduce(torch, "gloo", 2, args.timeout, fault == "allreduce"),
        ),
        ("dataloader_workers", lambda: check_dataloader(torch, on_gpu=False)),
    ]
    for name, fn in steps:
        results.append(guarded(name, fn))
        table.row(results[-1])
    return results
