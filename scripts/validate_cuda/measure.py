"""Measuring, small on purpose: each function runs one thing on the device and returns numbers."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .common import ALLREDUCE_NUMEL, LoaderResult, MemoryResult, first_line


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
