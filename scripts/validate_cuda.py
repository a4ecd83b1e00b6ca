#!/usr/bin/env python3
"""validate-cuda: prove the CUDA stack PyTorch sees works, or say exactly what is wrong.

It runs inside the image (/usr/local/bin/validate-cuda) and on any host with PyTorch, so it needs
only the standard library and torch (pynvml is used when present). Each check is judged by a pure
function that tests drive without a GPU; the parts that touch the GPU only measure.

Exit status: 0 every check passed; 1 a check failed or was skipped; 2 bad options; 3 no GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import datetime as dt
import json
import math
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

# torch warns on every import when numpy is absent (it does not need it); that noise would break
# the one-line answers. Top level, so the processes spawned for the all-reduce inherit it too.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

PROG = "validate-cuda"
DEFAULT_CUDA = "11.8"
DEFAULT_REPORT = Path("/workspace/logs/validate-cuda.json")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_GPU = 0, 1, 2, 3
PASS, FAIL, SKIP = "pass", "fail", "skip"

# Minimum Linux x86_64 driver of each CUDA toolkit's GA release (NVIDIA's CUDA release notes,
# "CUDA Toolkit and Corresponding Driver Versions"). Older drivers run some builds only through
# minor-version compatibility, without PTX JIT: not what a prebuilt image promises.
MIN_DRIVER: dict[str, str] = {
    "11.0": "450.51.05",
    "11.1": "455.23",
    "11.2": "460.27.03",
    "11.3": "465.19.01",
    "11.4": "470.42.01",
    "11.5": "495.29.05",
    "11.6": "510.39.01",
    "11.7": "515.43.04",
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
}
DRIVER_SOURCES = "NVML, /proc/driver/nvidia/version, nvidia-smi, libcuda"

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


# ---------------------------------------------------------------- pure: versions and parsing


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def normalize_cuda_version(text: str) -> str | None:
    """'11.8.0' and '11.8' -> '11.8' (torch reports major.minor); None when not a version."""
    match = re.fullmatch(r"\s*(\d+)\.(\d+)(?:\.\d+)*\s*", text)
    return f"{int(match[1])}.{int(match[2])}" if match else None


def resolve_expected_cuda(option: str | None, environ: Mapping[str, str]) -> tuple[str, str]:
    """The CUDA version torch must be built for, and where that came from.

    The image sets EXPECTED_CUDA (NVIDIA's base images set CUDA_VERSION); a host with another CUDA
    build passes --expect-cuda.
    """
    candidates = [("--expect-cuda", option)] + [
        (k, environ.get(k)) for k in ("EXPECTED_CUDA", "CUDA_VERSION")
    ]
    for source, raw in candidates:
        if raw is None or (source != "--expect-cuda" and not raw.strip()):
            continue
        version = normalize_cuda_version(raw)
        if version is None:
            raise UsageError(f"{source}={raw!r} is not a CUDA version like 11.8")
        return version, source
    return DEFAULT_CUDA, "default"


def min_driver_for(cuda: str) -> tuple[str, str] | None:
    """(minimum driver, CUDA release it is known for): the newest known release <= cuda."""
    known = [c for c in MIN_DRIVER if version_tuple(c) <= version_tuple(cuda)]
    if not known:
        return None
    release = max(known, key=version_tuple)
    return MIN_DRIVER[release], release


def parse_proc_driver_version(text: str) -> str | None:
    """Driver version from /proc/driver/nvidia/version (proprietary and open kernel modules)."""
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            for token in line.split():
                if re.fullmatch(r"\d+\.\d+(?:\.\d+)?", token):
                    return token
    return None


def parse_smi_driver_version(text: str) -> str | None:
    """First line of `nvidia-smi --query-gpu=driver_version --format=csv,noheader`."""
    for line in text.splitlines():
        token = line.strip()
        if token:
            return token if re.fullmatch(r"\d+\.\d+(?:\.\d+)?", token) else None
    return None


def format_cuda_api_version(value: int) -> str:
    """cuDriverGetVersion / NVML integer (12020) -> '12.2'."""
    return f"{value // 1000}.{value % 1000 // 10}"


def format_cudnn_version(value: int) -> str:
    """torch.backends.cudnn.version(): 8700 -> 8.7.0 (cuDNN 8), 90100 -> 9.1.0 (cuDNN 9+)."""
    if value >= 10000:
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"


def format_nccl_version(value: int | Sequence[int]) -> str:
    """torch.cuda.nccl.version(): a tuple in current torch, an int (2708, 21905) in old ones."""
    if isinstance(value, int):
        if value >= 10000:
            return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
        return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"
    return ".".join(str(part) for part in value)


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else 'no message'}"


# ---------------------------------------------------------------- pure: judging


def judge_driver(driver: DriverInfo, required_cuda: str, why: str) -> CheckResult:
    """Is the driver new enough for `required_cuda`? `why` says whose CUDA that is."""
    need = min_driver_for(required_cuda)
    need_text = f"driver >= {need[0]}" if need else "a driver"
    if need and need[1] != required_cuda:
        need_text += f" (the minimum for CUDA {need[1]}, the newest release this check knows)"
    data = {"version": driver.version, "source": driver.source, "cuda": driver.cuda}
    data["minimum"] = need[0] if need else None
    if driver.version is None:
        if driver.cuda is not None:
            ok = version_tuple(driver.cuda) >= version_tuple(required_cuda)
            detail = (
                f"driver version unreadable, but the driver ({driver.source}) supports CUDA up to "
                f"{driver.cuda}; CUDA {required_cuda} ({why}) needs {need_text}"
            )
            return CheckResult("driver", PASS if ok else FAIL, detail, driver.cuda, "CUDA", data)
        detail = (
            f"no NVIDIA driver found (looked at {DRIVER_SOURCES}); "
            f"CUDA {required_cuda} ({why}) needs {need_text}"
        )
        return CheckResult("driver", FAIL, detail, None, "", data)
    supports = f"; it supports CUDA up to {driver.cuda}" if driver.cuda else ""
    if need is None:
        detail = (
            f"driver {driver.version} ({driver.source}); no minimum known for CUDA {required_cuda}"
        )
        return CheckResult("driver", PASS, detail + supports, driver.version, "", data)
    if version_tuple(driver.version) >= version_tuple(need[0]):
        detail = f"driver {driver.version} ({driver.source}); CUDA {required_cuda} ({why})"
        detail += f" needs {need_text}"
        return CheckResult("driver", PASS, detail + supports, driver.version, "", data)
    detail = (
        f"driver {driver.version} ({driver.source}) is too old: CUDA {required_cuda} ({why}) needs "
        f"{need_text}; update the host's NVIDIA driver (containers use the host's)"
    )
    return CheckResult("driver", FAIL, detail + supports, driver.version, "", data)


def judge_cuda_available(
    available: bool, gpus: Sequence[str], torch_version: str, torch_cuda: str | None, note: str
) -> CheckResult:
    if available and gpus:
        detail = f"{len(gpus)} GPU(s): " + ", ".join(gpus)
        return CheckResult("cuda_available", PASS, detail, len(gpus), "GPUs")
    if torch_cuda is None:
        why = f"torch {torch_version} is a CPU-only build; install a CUDA build of torch"
    else:
        why = (
            f"torch {torch_version} (CUDA {torch_cuda}) finds no usable GPU; in a container, "
            "start it with --gpus all and the NVIDIA container toolkit"
        )
    detail = f"torch.cuda.is_available() is False: {why}" + (f" ({note})" if note else "")
    return CheckResult("cuda_available", FAIL, detail, 0, "GPUs")


def parse_arch(arch: str) -> tuple[str, int, int] | None:
    """'sm_90' -> ('sm', 9, 0); 'compute_86' -> ('compute', 8, 6); 'sm_90a' counts as sm_90."""
    match = re.fullmatch(r"(sm|compute)_(\d+)[a-z]?", arch)
    if not match:
        return None
    number = int(match[2])
    return match[1], number // 10, number % 10


def judge_gpu_arch(
    capabilities: Sequence[tuple[int, int]], names: Sequence[str], arch_list: Sequence[str]
) -> CheckResult:
    """Does torch ship kernels (a cubin of the same major, or PTX it can JIT) for every GPU?"""
    parsed = [p for p in (parse_arch(a) for a in arch_list) if p]
    missing, jit = [], []
    for index, ((major, minor), name) in enumerate(zip(capabilities, names, strict=True)):
        label = f"GPU {index} {name} (sm_{major}{minor})"
        if any(kind == "sm" and mj == major and mn <= minor for kind, mj, mn in parsed):
            continue
        if any(kind == "compute" and (mj, mn) <= (major, minor) for kind, mj, mn in parsed):
            jit.append(label)
        else:
            missing.append(label)
    listed = " ".join(arch_list) or "empty"
    if missing:
        detail = f"torch has no kernels for {', '.join(missing)}: its arch list is {listed}"
        return CheckResult("gpu_arch", FAIL, detail, listed)
    detail = f"torch ships kernels for every GPU ({listed})"
    if jit:
        detail += f"; {', '.join(jit)} only through PTX JIT (slow first start)"
    return CheckResult("gpu_arch", PASS, detail, listed)


def judge_cuda_version(
    actual: str | None, torch_version: str, expected: str, source: str
) -> CheckResult:
    """torch's CUDA build against the one expected (major.minor, the precision torch reports)."""
    where = f"expected CUDA {expected} (from {source})"
    if actual is None:
        detail = f"torch {torch_version} is a CPU-only build (torch.version.cuda is None); {where}"
        return CheckResult("cuda_version", FAIL, detail, None)
    if normalize_cuda_version(actual) == expected:
        return CheckResult("cuda_version", PASS, f"torch built for CUDA {actual}, {where}", actual)
    detail = (
        f"torch {torch_version} is built for CUDA {actual}, but {where}; on a host with another "
        f"CUDA build pass --expect-cuda {actual}"
    )
    return CheckResult("cuda_version", FAIL, detail, actual)


def compare_errors(errors: Mapping[str, float], tolerance: float) -> tuple[bool, str]:
    """All errors within tolerance (NaN never is), and a line listing them."""
    ok = all(error <= tolerance for error in errors.values())
    listed = ", ".join(f"{part} {error:.1e}" for part, error in errors.items())
    return ok, f"{listed} (tol {tolerance:.0e})"


def judge_conv(
    name: str, device: str, runs: Sequence[tuple[str, Mapping[str, float]]], library: str | None
) -> CheckResult:
    """conv2d forward/backward on `device` against float64 on the CPU, once per precision mode.

    The value shown is the library version (cuDNN) where there is one, else the worst error.
    """
    worst = max((e for _, errors in runs for e in errors.values()), default=math.nan)
    version = library or f"max err {worst:.1e}"
    lines, bad = [], []
    for mode, errors in runs:
        ok, line = compare_errors(errors, TOLERANCE[mode])
        lines.append(f"{mode}: {line}")
        if not ok:
            bad.append(mode)
    data = {"relative_error": {mode: dict(errors) for mode, errors in runs}}
    if bad:
        detail = (
            f"conv2d on {device} disagrees with the float64 CPU reference in {', '.join(bad)}: "
        )
        return CheckResult(name, FAIL, detail + "; ".join(lines), version, "", data)
    detail = f"conv2d forward+backward on {device} matches float64 CPU: " + "; ".join(lines)
    return CheckResult(name, PASS, detail, version, "", data)


def expected_allreduce_sum(world_size: int) -> float:
    """Rank r contributes r+1 everywhere, so every element must sum to 1+2+...+world_size."""
    return world_size * (world_size + 1) / 2


def judge_allreduce(
    name: str,
    backend: str,
    world_size: int,
    per_rank: Mapping[int, tuple[float, float]],
    error: str | None,
    library: str | None,
) -> CheckResult:
    """per_rank: rank -> (min, max) of the reduced tensor it holds afterwards."""
    expected = expected_allreduce_sum(world_size)
    procs = f"{world_size} process(es)" + (f" with {library}" if library else "")
    version = f"sum {per_rank[0][1]:g}" if 0 in per_rank else None
    data: dict[str, Any] = {"backend": backend, "world_size": world_size, "expected": expected}
    data["per_rank"] = {str(r): list(v) for r, v in sorted(per_rank.items())}
    if error:
        return CheckResult(
            name, FAIL, f"{backend} all-reduce over {procs} failed: {error}", version, "", data
        )
    problems = []
    for rank in range(world_size):
        if rank not in per_rank:
            problems.append(f"rank {rank} reported no result")
            continue
        low, high = per_rank[rank]
        if not (low == expected == high):
            held = f"{low:g}" if low == high else f"{low:g}..{high:g}"
            problems.append(f"rank {rank} holds {held}")
    if problems:
        detail = (
            f"{backend} all-reduce over {procs} gave the wrong sum: {'; '.join(problems)}; "
            f"expected {expected:g} = 1+...+{world_size} in every element"
        )
        return CheckResult(name, FAIL, detail, version, "", data)
    size = f"{ALLREDUCE_NUMEL * 4 >> 20} MiB"
    detail = (
        f"{backend} all-reduce of {size} over {procs}: every rank holds {expected:g}, as expected"
    )
    return CheckResult(name, PASS, detail, version, "", data)


def judge_matmul(dtype: str, tflops: float, error: float, n: int, note: str) -> CheckResult:
    ok, line = compare_errors({"error vs float64": error}, TOLERANCE[dtype])
    detail = f"{n}x{n} matmul {tflops:.1f} TFLOP/s; {line}" + (f"; {note}" if note else "")
    good = ok and math.isfinite(tflops) and tflops > 0
    if not good:
        detail = f"{dtype} matmul is wrong or did not run: {detail}"
    return CheckResult(
        f"matmul_{dtype}", PASS if good else FAIL, detail, round(tflops, 2), "TFLOP/s"
    )


def judge_bandwidth(pinned: bool, gbps: float, correct: bool, nbytes: int) -> CheckResult:
    kind = "pinned" if pinned else "pageable"
    detail = f"{nbytes >> 20} MiB {kind} host memory -> GPU 0 at {gbps:.1f} GB/s"
    if not correct:
        return CheckResult(
            f"h2d_{kind}", FAIL, f"{detail}, but the data arrived wrong", round(gbps, 2), "GB/s"
        )
    if not (math.isfinite(gbps) and gbps > 0):
        return CheckResult(
            f"h2d_{kind}", FAIL, f"{detail}: no copy was timed", round(gbps, 2), "GB/s"
        )
    return CheckResult(f"h2d_{kind}", PASS, f"{detail}, data verified", round(gbps, 2), "GB/s")


def judge_memory(results: Sequence[MemoryResult], fraction: float) -> CheckResult:
    gib = 1 << 30
    parts, ok = [], bool(results)
    for r in results:
        part = (
            f"GPU {r.device}: {r.allocated / gib:.1f} of {r.free / gib:.1f} GiB free "
            f"({r.total / gib:.1f} GiB total)"
        )
        if r.error or r.allocated < r.target or not r.verified:
            ok = False
            why = r.error or ("contents read back wrong" if r.allocated >= r.target else "short")
            part += f" FAILED at {r.allocated / gib:.1f} of {r.target / gib:.1f} GiB wanted: {why}"
        parts.append(part)
    total = sum(r.allocated for r in results) / gib
    data = {"per_gpu": [dataclasses.asdict(r) for r in results], "fraction": fraction}
    head = f"allocated {fraction:.0%} of free memory, wrote and read it back, freed it: "
    detail = (head if ok else "could not allocate most of the free GPU memory: ") + "; ".join(parts)
    return CheckResult("gpu_memory", PASS if ok else FAIL, detail, round(total, 1), "GiB", data)


def judge_dataloader(
    name: str, result: LoaderResult, workers: int, pin: bool, note: str
) -> CheckResult:
    rate = result.samples / result.seconds if result.seconds > 0 else 0.0
    where = "pinned, to the GPU" if pin else "to the CPU"
    problems = list(result.wrong[:3])
    if result.batches != result.expected_batches:
        problems.append(f"{result.batches} of {result.expected_batches} batches arrived")
    if pin and result.unpinned:
        problems.append(f"{result.unpinned} batches were not in pinned memory")
    detail = f"{result.batches} batches from {workers} workers {where} ({rate:.0f} samples/s)" + (
        f"; {note}" if note else ""
    )
    if problems:
        return CheckResult(
            name, FAIL, f"{detail}: {'; '.join(problems)}", round(rate, 1), "samples/s"
        )
    return CheckResult(name, PASS, f"{detail}, contents verified", round(rate, 1), "samples/s")


def shm_hint(message: str) -> str:
    """In containers, dead DataLoader workers and NCCL shared-memory errors mean a small shm."""
    if any(s in message for s in ("Bus error", "shared memory", "shm", "killed by signal")):
        return message + " (is /dev/shm too small? docker run --shm-size=16g or --ipc=host)"
    return message


def no_gpu_line(driver: DriverInfo, torch_version: str, torch_cuda: str | None) -> str:
    """The one line printed when there is no GPU and --cpu-only was not given."""
    build = (
        f"torch {torch_version} is a CPU-only build"
        if torch_cuda is None
        else (f"torch {torch_version} (CUDA {torch_cuda}) sees no GPU")
    )
    return (
        f"{PROG}: no NVIDIA GPU: no driver found ({DRIVER_SOURCES}) and {build}; "
        "--cpu-only checks only the CPU-side parts"
    )


def format_value(result: CheckResult) -> str:
    if result.value is None:
        return "-"
    text = f"{result.value:.1f}" if isinstance(result.value, float) else str(result.value)
    if len(text) > 24:
        text = text[:21] + "..."
    return f"{text} {result.unit}".strip()


class Table:
    """Rows are printed as each check finishes: the widths are known from the planned names."""

    def __init__(self, names: Sequence[str], out: Any) -> None:
        self.width = max(len(n) for n in names) + 2
        self.out = out

    def header(self, lines: Sequence[str]) -> None:
        for line in lines:
            print(line, file=self.out)
        print(f"{'CHECK':<{self.width}}{'STATUS':<8}{'VALUE':<22}DETAIL", file=self.out, flush=True)

    def row(self, r: CheckResult) -> None:
        line = f"{r.name:<{self.width}}{r.status.upper():<8}{format_value(r):<22}{r.detail}"
        print(line, file=self.out, flush=True)


def summary_line(results: Sequence[CheckResult]) -> str:
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, SKIP)}
    verdict = "PASS" if overall_ok(results) else "FAIL"
    return (
        f"{PROG}: {verdict}: {len(results)} checks, {counts[PASS]} passed, "
        f"{counts[FAIL]} failed, {counts[SKIP]} skipped"
    )


def overall_ok(results: Sequence[CheckResult]) -> bool:
    return bool(results) and all(r.status == PASS for r in results)


def build_report(
    mode: str,
    expected: tuple[str, str],
    environment: Mapping[str, Any],
    results: Sequence[CheckResult],
) -> dict[str, Any]:
    return {
        "tool": PROG,
        "format": 1,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "mode": mode,
        "expected_cuda": expected[0],
        "expected_cuda_source": expected[1],
        "environment": dict(environment),
        "passed": overall_ok(results),
        "checks": [dataclasses.asdict(r) for r in results],
    }


# ---------------------------------------------------------------- reading the machine


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
    with contextlib.suppress(OSError):
        st = os.statvfs("/dev/shm")
        return f"{st.f_frsize * st.f_blocks / (1 << 20):.0f} MiB"
    return "unknown"


def environment(torch: Any, driver: DriverInfo | None) -> dict[str, Any]:
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "dev_shm": shm_size(),
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


# ---------------------------------------------------------------- measuring (small on purpose)


def relative_error(torch: Any, candidate: Any, reference: Any) -> float:
    diff = (candidate.detach().to("cpu", torch.float64) - reference.detach()).norm().item()
    scale = reference.detach().norm().item()
    return diff / scale if scale > 0 else diff


@contextlib.contextmanager
def tf32(torch: Any, enabled: bool) -> Iterator[None]:
    """TF32 on or off for both cuBLAS and cuDNN, restored afterwards."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # newer torch nudges towards fp32_precision
        old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = enabled
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def conv_errors(torch: Any, device: str, fault: bool) -> dict[str, float]:
    """conv2d forward and backward in float32 on `device` vs float64 on the CPU."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(8, 16, 32, 32, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.randn(32, 16, 3, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    grad_out = torch.randn(8, 32, 32, 32, dtype=torch.float64, generator=gen)
    ref = torch.nn.functional.conv2d(x, w, padding=1)
    ref.backward(grad_out)
    x32 = x.detach().float().to(device).requires_grad_()
    w32 = w.detach().float().to(device).requires_grad_()
    out = torch.nn.functional.conv2d(x32, w32, padding=1)
    out.backward(grad_out.float().to(device))
    if fault:  # --inject-fault conv: a kernel 5% off
        out = out * 1.05
    return {
        "forward": relative_error(torch, out, ref),
        "grad_input": relative_error(torch, x32.grad, x.grad),
        "grad_weight": relative_error(torch, w32.grad, w.grad),
    }


def allreduce_worker(
    rank: int,
    world_size: int,
    backend: str,
    store: str,
    out_dir: str,
    wrong_rank: int,
    timeout_s: float,
) -> None:
    """One process per GPU (or CPU rank): contribute rank+1, all-reduce, report what came back."""
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        os.environ.setdefault(var, "lo")  # one host: never reach for another interface's address
    import torch
    import torch.distributed as dist

    device = torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
    options: dict[str, Any] = {
        "init_method": f"file://{store}",
        "rank": rank,
        "world_size": world_size,
        "timeout": dt.timedelta(seconds=timeout_s),
    }
    if backend == "nccl":
        options["device_id"] = device  # torch >= 2.3: binds the rank to its GPU, no guessing
    try:
        dist.init_process_group(backend, **options)
    except TypeError:  # older torch without device_id
        options.pop("device_id", None)
        dist.init_process_group(backend, **options)
    try:
        # --inject-fault allreduce: this rank's data goes missing (contributes zeros)
        value = 0.0 if rank == wrong_rank else float(rank + 1)
        tensor = torch.full((ALLREDUCE_NUMEL,), value, dtype=torch.float32, device=device)
        dist.all_reduce(tensor)
        low, high = tensor.min().item(), tensor.max().item()
    finally:
        dist.destroy_process_group()
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps([low, high]))


def run_allreduce(
    backend: str, world_size: int, timeout_s: float, wrong_rank: int = -1
) -> tuple[dict[int, tuple[float, float]], str | None]:
    """Spawn the ranks (spawn, not fork: CUDA cannot be forked) and collect what each holds."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="validate-cuda-") as tmp:
        store = os.path.join(tmp, "store")
        args = (world_size, backend, store, tmp, wrong_rank, timeout_s)
        error = None
        ctx = mp.start_processes(allreduce_worker, args, nprocs=world_size, join=False)
        deadline = time.monotonic() + timeout_s + 60
        try:
            while not ctx.join(timeout=1):
                if time.monotonic() > deadline:
                    error = f"no result within {timeout_s + 60:.0f} s (a hang in the collective?)"
                    break
        except Exception as exc:  # ProcessRaisedException carries the worker's traceback text
            lines = [line for line in str(exc).strip().splitlines() if line.strip()]
            error = lines[-1].strip() if lines else first_line(exc)
        finally:
            for proc in ctx.processes:
                if proc.is_alive():
                    proc.terminate()
                proc.join(5)
        per_rank = {}
        for rank in range(world_size):
            path = Path(tmp, f"rank{rank}.json")
            if path.exists():
                low, high = json.loads(path.read_text())
                per_rank[rank] = (low, high)
    return per_rank, error


def matmul_measure(torch: Any, dtype: str, n: int) -> tuple[float, float]:
    """(TFLOP/s on GPU 0, relative error of a small product vs float64)."""
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[dtype]
    with tf32(torch, dtype == "tf32"):
        gen = torch.Generator().manual_seed(1)
        a = torch.randn(512, 1024, dtype=torch.float64, generator=gen)
        b = torch.randn(1024, 512, dtype=torch.float64, generator=gen)
        small = a.to("cuda", torch_dtype) @ b.to("cuda", torch_dtype)
        error = relative_error(torch, small, a @ b)
        x = torch.randn(n, n, device="cuda", dtype=torch_dtype)
        y = torch.randn(n, n, device="cuda", dtype=torch_dtype)
        seconds = gpu_time(torch, lambda: torch.matmul(x, y), warmup=3)
    return 2 * n**3 / seconds / 1e12, error


def gpu_time(torch: Any, fn: Callable[[], Any], warmup: int, budget_s: float = 0.5) -> float:
    """Seconds per call of `fn`, timed with CUDA events over about `budget_s`."""
    fn()  # the first call pays for library handles and workspaces: keep it out of the estimate
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(warmup):
        fn()
    end.record()
    end.synchronize()
    per_call = max(start.elapsed_time(end) / 1000 / warmup, 1e-6)
    iters = int(min(max(budget_s / per_call, 5), 1000))
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000 / iters


def h2d_measure(torch: Any, pinned: bool, nbytes: int) -> tuple[float, bool]:
    """(GB/s host -> GPU 0, whether the bytes arrived intact)."""
    src = torch.arange(256, dtype=torch.uint8).repeat(nbytes // 256)
    if pinned:
        src = src.pin_memory()
    dst = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    seconds = gpu_time(torch, lambda: dst.copy_(src, non_blocking=pinned), warmup=2, budget_s=0.3)
    torch.cuda.synchronize()
    probe = slice(nbytes - (1 << 20), nbytes)
    correct = torch.equal(dst[: 1 << 20].cpu(), src[: 1 << 20]) and torch.equal(
        dst[probe].cpu(), src[probe]
    )
    return nbytes / seconds / 1e9, correct


def allocate_most(torch: Any, device: int, fraction: float) -> MemoryResult:
    """Plain cudaMalloc-backed tensors (never managed memory) up to `fraction` of free memory."""
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info(device)
    target, allocated, chunks, error, verified = int(free * fraction), 0, [], "", False
    try:
        while allocated < target:
            size = min(1 << 30, target - allocated)
            chunk = torch.empty(size, dtype=torch.uint8, device=f"cuda:{device}")
            chunk.fill_(len(chunks) % 251)
            chunks.append(chunk)
            allocated += size
        verified = all(int(c[-1].item()) == i % 251 for i, c in enumerate(chunks))
    except torch.cuda.OutOfMemoryError as exc:
        error = first_line(exc)
    finally:
        del chunks
        torch.cuda.empty_cache()
    return MemoryResult(device, free, total, target, allocated, verified, error)


class PatternDataset:
    """Sample i is a (3, 64, 64) float32 tensor full of i, so every batch can be checked exactly.

    A plain map-style dataset (no torch at class definition: torch is imported lazily).
    """

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> Any:
        import torch

        return torch.full((3, 64, 64), float(index)), index


def run_dataloader(
    torch: Any, device: str, pin: bool, workers: int, samples: int = 512
) -> LoaderResult:
    batch_size = 32
    loader = torch.utils.data.DataLoader(
        PatternDataset(samples),
        batch_size=batch_size,
        num_workers=workers,
        pin_memory=pin,
        timeout=120,
    )
    batches, unpinned, wrong = 0, 0, []
    start = time.perf_counter()
    for images, labels in loader:
        if pin and not images.is_pinned():
            unpinned += 1
        images = images.to(device, non_blocking=pin)
        expected = labels.to(device, non_blocking=pin).float()
        low, high = images.amin(dim=(1, 2, 3)), images.amax(dim=(1, 2, 3))
        if not (torch.equal(low, expected) and torch.equal(high, expected)):
            wrong.append(f"batch {batches} has wrong contents")
        batches += 1
    if device != "cpu":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return LoaderResult(batches, math.ceil(samples / batch_size), wrong, unpinned, seconds, samples)


# ---------------------------------------------------------------- the checks


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


# ---------------------------------------------------------------- command line


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def fraction_type(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction between 0 and 1")
    return value


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 64")
    return int(text)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = OneLineParser(
        prog=PROG,
        description="Check the CUDA stack PyTorch sees; a table on stdout, a JSON report, "
        "exit 0 only if every check passed.",
    )
    parser.add_argument("--cpu-only", action="store_true", help="check only the CPU-side parts")
    parser.add_argument(
        "--expect-cuda",
        metavar="VERSION",
        help="CUDA version torch must be built for (default: $EXPECTED_CUDA, $CUDA_VERSION, 11.8)",
    )
    parser.add_argument(
        "--report", metavar="PATH", type=Path, help=f"JSON report path (default {DEFAULT_REPORT})"
    )
    parser.add_argument(
        "--memory-fraction",
        type=fraction_type,
        default=0.9,
        metavar="F",
        help="share of free GPU memory to allocate (default 0.9)",
    )
    parser.add_argument(
        "--matmul-size", type=positive_int, default=8192, metavar="N", help="N of the NxN matmuls"
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=120.0,
        metavar="S",
        help="seconds allowed for the all-reduce (default 120)",
    )
    parser.add_argument(
        "--inject-fault",
        choices=FAULTS,
        help="break one check on purpose, to see how a failure reads (testing the validator)",
    )
    return parser.parse_args(argv)


def write_report(report: Mapping[str, Any], path: Path, explicit: bool) -> str:
    """Write atomically; the line to print either way (an unwritable directory is not fatal)."""
    try:
        if explicit and not path.parent.exists():
            path.parent.mkdir(parents=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(report, indent=2) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        where = f"{path.parent} is not writable ({reason})"
        return f"{PROG}: report not written: {where}; use --report PATH"
    return f"{PROG}: report written to {path}"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        expected = resolve_expected_cuda(args.expect_cuda, os.environ)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    torch, torch_check = import_torch()
    driver = None if args.cpu_only else read_driver()
    no_driver = driver is not None and driver.version is None and driver.cuda is None
    if torch is not None and no_driver and not torch.cuda.is_available():
        print(no_gpu_line(driver, torch.__version__, torch.version.cuda), file=sys.stderr)
        return EXIT_NO_GPU
    mode = "cpu-only" if args.cpu_only else "gpu"
    table = Table(CPU_CHECKS if args.cpu_only else GPU_CHECKS, sys.stdout)
    header = f"{PROG} ({mode}) on {socket.gethostname()}: {torch_check.detail}"
    expecting = [] if args.cpu_only else [f"expecting CUDA {expected[0]} (from {expected[1]})"]
    table.header([header, *expecting])
    if torch is None:
        results = [torch_check]
        if driver is not None:
            results.append(judge_driver(driver, expected[0], f"expected, from {expected[1]}"))
        for result in results:
            table.row(result)
    elif args.cpu_only:
        results = cpu_checks(torch, torch_check, args, table)
    else:
        assert driver is not None
        results = gpu_checks(torch, torch_check, driver, args, expected, table)
    print(summary_line(results))
    try:
        env = environment(torch, driver)
    except Exception as exc:  # a half-working CUDA must not cost the report
        env = {"error": first_line(exc)}
    report = build_report(mode, expected, env, results)
    print(write_report(report, args.report or DEFAULT_REPORT, args.report is not None), flush=True)
    return EXIT_OK if overall_ok(results) else EXIT_FAILED


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        sys.exit(130)
