"""The training child of benchmarks/verdicts.py: a real DataLoader over real files.

    python -m benchmarks.verdicts_train --data DIR --seconds 70 --workers 2 --cold ...

Reads `small/` (whole small files, shuffled) or `large/` (4 MiB chunks of large files, in
order); `--transform heavy` hashes every sample 40 times in the worker (a CPU-heavy decode);
`--step heavy` trains a real convolutional model per batch, `cheap` a near-free step (a fast
GPU); `--cold` drops the page cache before every epoch; `--no-wrap` leaves the DataLoader
without `diskinfo.torch.watch`; `--preload` reads every sample into memory first;
`--start-read-mb N` / `--start-read-files N` read that much, cold, before the loader exists
(a start that reads its libraries or the dataset's index through the container's read cap).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from pathlib import Path

CHUNK = 4 << 20
HEAVY_ROUNDS = 40


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


class Samples:
    """Map-style dataset of byte strings: whole files, or chunks of large files."""

    def __init__(self, root: str, large: bool, heavy: bool) -> None:
        self.heavy = heavy
        if large:
            self.items = [
                (str(f), off)
                for f in sorted(Path(root, "large").iterdir())
                for off in range(0, f.stat().st_size, CHUNK)
            ]
        else:
            self.items = [(str(f), -1) for f in sorted(Path(root, "small").rglob("*.bin"))]
        self.blobs: list[bytes] | None = None

    def preload(self) -> None:
        self.blobs = [self.read(i) for i in range(len(self.items))]

    def read(self, i: int) -> bytes:
        path, off = self.items[i]
        with open(path, "rb") as h:
            if off < 0:
                return h.read()
            h.seek(off)
            return h.read(CHUNK)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int):
        import torch

        raw = self.blobs[i] if self.blobs is not None else self.read(i)
        if self.heavy:  # a CPU-heavy decode: hash the sample over and over
            for _ in range(HEAVY_ROUNDS):
                raw = raw[:-32] + hashlib.sha256(raw).digest()
        return torch.frombuffer(bytearray(raw[:3072]), dtype=torch.uint8).float().view(3, 32, 32)


def _cold_read(path: Path, limit: int) -> int:
    """Read up to `limit` bytes of `path` from the disk (its cached pages dropped first)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        done = 0
        while done < limit and (chunk := os.read(fd, min(CHUNK, limit - done))):
            done += len(chunk)
        return done
    finally:
        os.close(fd)


def start_read(root: str, mb: int, files: int) -> None:
    """The start's own reads, before any batch: `mb` MiB of the large files, `files` small
    files (cold)."""
    left = mb << 20
    for f in sorted(Path(root, "large").iterdir()) if left else ():
        left -= _cold_read(f, left)
        if left <= 0:
            break
    for f in sorted(Path(root, "small").rglob("*.bin"))[:files]:
        _cold_read(f, 1 << 30)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--data", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--large", action="store_true")
    p.add_argument("--transform", choices=("none", "heavy"), default="none")
    p.add_argument("--step", choices=("cheap", "heavy"), default="cheap")
    p.add_argument("--cold", action="store_true")
    p.add_argument("--preload", action="store_true")
    p.add_argument("--no-wrap", action="store_true")
    p.add_argument("--start-read-mb", type=int, default=0)
    p.add_argument("--start-read-files", type=int, default=0)
    p.add_argument("--pid-file", required=True)
    a = p.parse_args()

    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader

    torch.set_num_threads(1)
    torch.manual_seed(0)
    Path(a.pid_file).write_text(f"{os.getpid()}\n")
    start_read(a.data, a.start_read_mb, a.start_read_files)
    ds = Samples(a.data, a.large, a.transform == "heavy")
    if a.preload:
        ds.preload()
    if a.step == "heavy":
        model = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1),
            nn.ReLU(), nn.Flatten(), nn.Linear(64 * 32 * 32, 10),
        )  # fmt: skip
    else:
        model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(
        ds, batch_size=8 if a.large else 32, shuffle=not a.large, num_workers=a.workers
    )
    if not a.no_wrap:
        import diskinfo.torch

        loader = diskinfo.torch.watch(loader)
    deadline = time.monotonic() + a.seconds
    steps = 0
    while time.monotonic() < deadline:
        if a.cold:
            drop_caches()
        for x in loader:
            loss = model(x / 255).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
            if time.monotonic() > deadline:
                break
    print(f"steps={steps}", flush=True)


if __name__ == "__main__":
    main()
