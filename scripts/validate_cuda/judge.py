"""Judging: each check's verdict and message as a pure function of what was measured."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .common import (
    ALLREDUCE_NUMEL,
    DEFAULT_CUDA,
    FAIL,
    PASS,
    PROG,
    TOLERANCE,
    CheckResult,
    DriverInfo,
    LoaderResult,
    MemoryResult,
    UsageError,
)
from .drivers import DRIVER_SOURCES, min_driver_for, version_tuple


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
