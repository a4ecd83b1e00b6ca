"""Small versions of the verdict benchmark's workloads, as `diskinfo tune` factories.

- `too_few_workers`: each sample waits 3 ms (storage or network latency), nothing on CPU:
  throughput grows with workers, and the current setting has none;
- `cpu_decode`: each sample burns ~1.5 ms of CPU (image decoding): workers help up to the
  cores;
- `small_files(root)`: one small file read per sample from `$TUNE_FILES` (the system test
  makes them and drops the cache before each setting).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import torch
import torch.utils.data

N = 4000


class Latency(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return N

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(0.003)
        return torch.tensor([index])


class Decode(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return N

    def __getitem__(self, index: int) -> torch.Tensor:
        data = index.to_bytes(8, "little")
        end = time.thread_time() + 0.0015
        while time.thread_time() < end:
            data = hashlib.sha256(data).digest()
        return torch.tensor([data[0]])


class Files(torch.utils.data.Dataset):
    def __init__(self, root: str) -> None:
        self.paths = sorted(str(p) for p in Path(root).rglob("*.bin"))

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> int:
        with open(self.paths[index], "rb") as fh:
            return len(fh.read())


def too_few_workers() -> torch.utils.data.DataLoader:
    return torch.utils.data.DataLoader(Latency(), batch_size=32, num_workers=0)


def cpu_decode() -> torch.utils.data.Dataset:
    return Decode()


def small_files() -> torch.utils.data.Dataset:
    return Files(os.environ["TUNE_FILES"])


def raises() -> torch.utils.data.Dataset:
    raise RuntimeError("no data mounted at /data")


def not_a_dataset() -> list[int]:
    return [1, 2, 3]


def broken_sample() -> torch.utils.data.Dataset:
    class Broken(Latency):
        def __getitem__(self, index: int) -> torch.Tensor:
            raise KeyError(f"label of sample {index}")

    return Broken()


def _length(sample: dict) -> int:
    return len(sample["bin"])


def files_or_shards(shards: str | None = None) -> torch.utils.data.Dataset:
    """The files in $TUNE_FILES, or with `--pack DEST` the same samples from the shards."""
    if shards:
        from diskinfo.shards import ShardDataset

        return ShardDataset(shards, transform=_length)
    return Files(os.environ["TUNE_FILES"])


_WEIGHTS = torch.randn(64, 64) / 8


def busy_step(batch: torch.Tensor) -> float:
    """A training step on the CPU: matrix products on the process's intra-op threads."""
    x = torch.ones(len(batch), 64)
    for _ in range(600):
        x = torch.tanh(x @ _WEIGHTS)
    return float(x.sum())


def failing_step(batch: torch.Tensor) -> None:
    raise ValueError("shapes (32,1) and (64,64) do not match")
