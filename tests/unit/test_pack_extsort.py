"""The pack's plan on disk (`shards.pack.extsort`): sorted pieces merged into the same order
memory would give, the same shards through them, nothing left behind, and memory that does
not grow with the number of files."""

from __future__ import annotations

import os
import random
import tracemalloc
from pathlib import Path

import pytest

import diskinfo.shards.pack.extsort as extsort
import diskinfo.shards.pack.shard as shardmod
import diskinfo.shards.pack.spill as spillmod
from diskinfo.shards.pack import pack


def tree(root: Path, classes: int, per: int, seed: int = 5) -> None:
    """class/NNNNN.bin files, every third sample with a .json beside it; fixed mtimes, so
    the shards' bytes depend on the code alone."""
    rng = random.Random(seed)
    for c in range(classes):
        folder = root / f"c{c:02d}"
        folder.mkdir(parents=True)
        for i in range(per):
            files = [folder / f"{i:05d}.bin"] + ([folder / f"{i:05d}.json"] if i % 3 == 0 else [])
            for path in files:
                path.write_bytes(rng.randbytes(rng.randint(1, 300)))
                os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def small_pieces(monkeypatch: pytest.MonkeyPatch, piece: int, block: int, fanin: int) -> None:
    monkeypatch.setattr(extsort, "PIECE", piece)
    monkeypatch.setattr(extsort, "BLOCK", block)
    monkeypatch.setattr(extsort, "FANIN", fanin)


def test_merged_pieces_give_the_sorted_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_pieces(monkeypatch, piece=10, block=3, fanin=3)  # 100 pieces, merged in rounds
    rng = random.Random(1)
    records = [(rng.choice("abc") * rng.randint(0, 3), rng.randrange(50), i) for i in range(1000)]
    fds = len(os.listdir("/proc/self/fd"))
    out = extsort.merged(iter(records), tmp_path)
    assert next(out) == min(records)
    assert os.listdir(tmp_path) == []  # the pieces have no names: nothing for a kill to leave
    assert [min(records), *out] == sorted(records)
    assert len(os.listdir("/proc/self/fd")) == fds  # every piece closed


def test_shards_through_pieces_on_disk_are_the_shards_of_one_sort(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small pieces force every sort of the plan through files and merges: the shards, the
    manifest's counts and the batch-mix prediction must be those of a plan sorted in memory."""
    tree(tmp_path / "src", 6, 50)
    options: list[dict] = [{"shards": 5}, {"shard_size": 20_000}, {"shuffle_seed": None}]
    whole = [pack(tmp_path / "src", tmp_path / f"a{i}", **o) for i, o in enumerate(options)]
    small_pieces(monkeypatch, piece=7, block=2, fanin=2)
    for i, o in enumerate(options):
        on_disk = pack(tmp_path / "src", tmp_path / f"b{i}", **o)
        for key in ("shards", "samples", "class_counts", "extensions", "mixing"):
            if key == "shards":
                assert [s["sha256"] for s in on_disk[key]] == [s["sha256"] for s in whole[i][key]]
            else:
                assert on_disk[key] == whole[i][key], key


def test_the_shards_are_those_the_plan_in_memory_wrote(tmp_path: Path) -> None:
    """Pinned: the sha256 of each shard the earlier design (every sample an object, shuffled
    as a list) wrote for this tree, seed 0 and seed 3. The same seed must keep giving the
    same shards, byte for byte, and so the same shuffle (with the `cls` members it wrote)."""
    tree(tmp_path / "src", 4, 30)
    got = {
        seed: [s["sha256"][:16] for s in pack(tmp_path / "src", tmp_path / f"s{seed}",
                                              shards=3, shuffle_seed=seed,
                                              labels="member")["shards"]]
        for seed in (0, 3)
    }  # fmt: skip
    assert got == PINNED


PINNED = {
    0: ["4e7dba980f87949e", "7ba18d8824bf6b7a", "7736e76e7adf8216"],
    3: ["27db46e4a032ab8b", "f2223e7d7bec9db2", "6063f33e89dc64d0"],
}


def _peak(src: Path, dest: Path) -> int:
    tracemalloc.start()
    try:
        pack(src, dest, shards=4)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Peak Python allocation of a pack of 3x the files: a few bytes more per file (the
    shuffle's arrays and the labels, 12 per sample, and a shard's spill index), where the
    plan held as objects cost about 700. Runs small enough that both sizes sort on disk, and
    read and write buffers (1 MiB, more than these shards) small enough that both fill them."""
    small_pieces(monkeypatch, piece=128, block=16, fanin=4)
    monkeypatch.setattr(shardmod, "CHUNK", 1 << 14)
    monkeypatch.setattr(spillmod, "CHUNK", 1 << 14)
    tree(tmp_path / "small", 10, 150)
    tree(tmp_path / "large", 10, 450)
    _peak(tmp_path / "small", tmp_path / "warm")  # imports and caches out of the figures
    small = _peak(tmp_path / "small", tmp_path / "s")
    large = _peak(tmp_path / "large", tmp_path / "l")
    files = 10 * (450 - 150) * 4 // 3  # a .json beside every third .bin
    per_file = (large - small) / files
    assert per_file < 48, f"{per_file:.0f} bytes more per file ({small} -> {large})"
