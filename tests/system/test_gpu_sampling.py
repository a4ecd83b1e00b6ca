"""The GPU path on a real NVIDIA GPU: NVML sampling at >= 10 Hz, the interval summary, and a
verdict that uses it. Skipped where there is no GPU (this project's CI); on a GPU host run

    PYTHONPATH=src python3 -m pytest -q tests/system/test_gpu_sampling.py

(outside a container is fine: it needs nvidia-ml-py, a CUDA torch and psutil).
"""

from __future__ import annotations

import threading
import time

import pytest

from diskinfo.collectors.gpu import GpuCollector
from diskinfo.record import IntervalRecord
from diskinfo.sources.nvml import Nvml

pytestmark = [pytest.mark.gpu, pytest.mark.system]


@pytest.fixture(scope="module")
def cuda():
    nvml, reason = Nvml.open()
    if nvml is None:
        pytest.skip(f"no GPU: {reason}")
    nvml.close()
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    return torch


def load(torch, seconds: float, on_s: float, off_s: float) -> None:
    """Matmuls for on_s, nothing for off_s, repeated: a GPU that waits for data in between."""
    a = torch.randn(8192, 8192, device="cuda")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        burst = time.monotonic() + on_s
        while time.monotonic() < burst:
            a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize()
        if off_s:
            time.sleep(off_s)


def sample_while(torch, seconds: float, on_s: float, off_s: float) -> IntervalRecord:
    collector = GpuCollector()
    collector.start()
    try:
        collector.fill(IntervalRecord(ts=0, elapsed_s=0))  # drop the warm-up samples
        t0 = time.monotonic()
        load(torch, seconds, on_s, off_s)
        record = IntervalRecord(ts=time.time(), elapsed_s=time.monotonic() - t0)
        collector.fill(record)
    finally:
        collector.stop()
    return record


def test_steady_load_is_busy_and_sampled_at_10_hz(cuda):
    record = sample_while(cuda, 3.0, on_s=3.0, off_s=0.0)
    gpu = record.gpus[0]
    print(gpu)
    assert gpu.samples >= 0.9 * 10 * record.elapsed_s
    assert gpu.util_mean >= 60 and gpu.idle_fraction <= 0.2 and gpu.pulsing < 0.3
    assert gpu.mem_used_mb > 256 and gpu.mem_total_mb > gpu.mem_used_mb
    assert gpu.power_w > 0


def test_bursts_between_idle_gaps_are_pulsing(cuda):
    record = sample_while(cuda, 6.0, on_s=0.6, off_s=0.6)
    gpu = record.gpus[0]
    print(gpu)
    assert gpu.bursts >= 2 and gpu.idle_fraction >= 0.2 and gpu.pulsing >= 0.3
    assert gpu.util_min < 10 and gpu.util_max >= 80


def test_a_slow_loader_feeding_a_gpu_is_input_bound(cuda, tmp_path, monkeypatch):
    torch = cuda
    monkeypatch.setenv("DISKINFO_STATE_DIR", str(tmp_path))
    import diskinfo.torch as dt
    from diskinfo.analyse.diagnoser import Diagnoser
    from diskinfo.collectors.loader import LoaderCollector
    from diskinfo.monitor import Monitor

    monkeypatch.setattr(dt, "_meter", None)
    records: list[IntervalRecord] = []

    class Keep:
        def write(self, record):
            records.append(record)

        def close(self):
            pass

    class Slow(torch.utils.data.Dataset):  # 20 ms per sample on the CPU: the GPU waits
        def __len__(self):
            return 10_000

        def __getitem__(self, i):
            time.sleep(0.02)
            return torch.randn(3, 64, 64)

    monitor = Monitor(
        1.0, [GpuCollector(), LoaderCollector(tmp_path)], [Keep()], analyser=Diagnoser({}), count=5
    )
    thread = threading.Thread(target=monitor.run)
    thread.start()
    model = torch.nn.Conv2d(3, 64, 3).cuda()
    for x in dt.watch(torch.utils.data.DataLoader(Slow(), batch_size=8)):
        model(x.cuda(non_blocking=True)).sum().item()
        if not thread.is_alive():
            break
    thread.join()
    judged = [r for r in records if r.loader is not None and r.loader.batches > 0]
    assert judged and all(r.gpus for r in judged)
    print([(r.verdict.verdict, r.gpus[0].util_mean, r.loader.wait_share) for r in judged])
    assert sum(r.verdict.verdict.startswith("input-bound") for r in judged) >= len(judged) - 1
    assert any("GPU 0: utilisation" in e for e in judged[-1].verdict.evidence)
