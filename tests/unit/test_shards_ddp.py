"""Two ranks on gloo reading one pack with 2 DataLoader workers each: with even= both ranks
run the same number of batches and a collective per batch never hangs at the epoch's end."""

from __future__ import annotations

import datetime
import multiprocessing
import random
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.utils.data

from diskinfo.shards import ShardDataset
from diskinfo.shards.pack import pack
from tests.helpers.net import free_port

WORLD, WORKERS, BATCH = 2, 2, 8
MODES = (None, "drop", "pad")


def label(sample: dict) -> int:
    return int(sample["cls"])


def rank_main(rank: int, port: int, dest: str, out) -> None:
    """Each mode on the same process group; workers started by spawn, as Python 3.14's
    default forkserver does, so they see no process group of their own."""
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=WORLD,
        timeout=datetime.timedelta(seconds=30),
    )
    try:
        for even in MODES:
            ds = ShardDataset(dest, even=even, transform=label)
            loader = torch.utils.data.DataLoader(
                ds,
                batch_size=BATCH,
                num_workers=WORKERS,
                persistent_workers=True,
                multiprocessing_context="spawn",
            )
            batches = samples = 0
            for epoch in range(2):
                ds.set_epoch(epoch)
                for labels in loader:
                    if even is not None:
                        total = torch.tensor([labels.numel()])
                        dist.all_reduce(total)  # hangs, then times out, if the other is done
                    batches += 1
                    samples += labels.numel()
            out.put((rank, even, batches, samples, None))
    except Exception as exc:
        out.put((rank, "error", -1, -1, f"{type(exc).__name__}: {exc}"))
    finally:
        dist.destroy_process_group()


def run_world(dest: Path) -> dict[tuple[int, str | None], tuple[int, int]]:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, port, str(dest), out)) for r in range(WORLD)]
    for p in procs:
        p.start()
    results = {}
    for _ in range(WORLD * len(MODES)):
        rank, even, batches, samples, error = out.get(timeout=240)
        assert error is None, f"rank {rank}: {error}"
        results[(rank, even)] = (batches, samples)
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """11 shards for 4 readers: whole shards deal 3+3 to rank 0 and 3+2 to rank 1."""
    root = tmp_path_factory.mktemp("ddp")
    rng = random.Random(0)
    for c in range(3):
        (root / "src" / f"c{c}").mkdir(parents=True)
        for i in range(110):
            (root / "src" / f"c{c}" / f"{i:03d}.bin").write_bytes(rng.randbytes(32))
    pack(root / "src", root / "out", shards=11)
    return root / "out"


@pytest.mark.slow
def test_even_ranks_run_the_same_batches(packed: Path) -> None:
    results = run_world(packed)
    # without even= the ranks differ: the hang even= exists to prevent (the test can fail)
    assert results[(0, None)][0] != results[(1, None)][0], results
    assert results[(0, None)][1] + results[(1, None)][1] == 2 * 330  # each sample once
    for even in ("drop", "pad"):
        assert results[(0, even)] == results[(1, even)], results
        per_epoch = results[(0, even)][1] * WORLD / 2
        assert (per_epoch < 330) if even == "drop" else (per_epoch >= 330)
