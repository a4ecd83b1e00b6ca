"""/dev/shm: one clear warning with the fix when it is Docker's default 64 MB, none when large.

DataLoader workers hand batches over through /dev/shm and die with "Bus error" when it is too
small; the monitor repeats the fix in its verdicts when that happens.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.image

FIX = "--shm-size=16g or --ipc=host"


def _logs_volume(tmp_path: Path) -> dict[str, dict[str, str]]:
    logs = tmp_path / "logs"
    logs.mkdir()
    return {str(logs): {"bind": "/workspace/logs", "mode": "rw"}}


def test_small_shm_gets_one_warning_with_the_fix(container, tmp_path):
    running = container("true", shm_size="64m", volumes=_logs_volume(tmp_path))
    assert running.wait(timeout=90) == 0, running.logs()[-3000:]
    logs = running.logs()
    warnings = [line for line in logs.splitlines() if FIX in line]
    assert len(warnings) == 1, logs[-3000:]
    assert warnings[0].startswith("WARNING") and "64 MB" in warnings[0]
    assert "Bus error" in warnings[0]
    assert FIX in (tmp_path / "logs" / "startup.log").read_text()


def test_large_shm_gets_no_warning(container):
    running = container("cat", "/run/pytorch-cuda/shm_mb", shm_size="2g")
    assert running.wait(timeout=90) == 0, running.logs()[-3000:]
    logs = running.logs()
    assert FIX not in logs
    assert "/dev/shm   2048 MB" in logs
    assert "\n2048\n" in logs  # the size recorded for the monitor


# Batches of 24 MB through a 64 MB /dev/shm: the workers die with SIGBUS ("Bus error").
TRAIN = textwrap.dedent(
    """
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset
    import diskinfo.torch

    class Big(Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            return torch.ones(6 * 2**20)  # 24 MB of float32 per sample

    loader = diskinfo.torch.watch(DataLoader(Big(), batch_size=1, num_workers=2))
    try:
        for _ in loader:
            pass
        print("TRAIN: no worker died")
    except Exception as exc:
        print("TRAIN: DataLoader failed:", type(exc).__name__, str(exc).strip().splitlines()[-1])
    time.sleep(8)  # let the monitor take at least one interval with the failure in it
    """
)


@pytest.mark.slow
def test_monitor_verdict_repeats_the_fix_when_workers_die(container, tmp_path):
    volumes = _logs_volume(tmp_path)
    running = container(
        "python", "-c", TRAIN, shm_size="64m", volumes=volumes, env={"DISKINFO_INTERVAL": "1"}
    )
    assert running.wait(timeout=180) == 0, running.logs()[-3000:]
    logs = running.logs()
    assert "TRAIN: DataLoader failed" in logs, logs[-3000:]
    records = []
    for path in (tmp_path / "logs").rglob("*.jsonl"):
        records += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert records, f"no JSONL records under logs: {list((tmp_path / 'logs').rglob('*'))}"
    failed = [r for r in records if (r.get("loader") or {}).get("worker_errors", 0) > 0]
    assert failed, "the monitor never saw the DataLoader worker deaths"
    verdicts = [json.dumps(r.get("verdict")) for r in failed]
    assert any("--shm-size=16g" in v for v in verdicts), verdicts[-1]
