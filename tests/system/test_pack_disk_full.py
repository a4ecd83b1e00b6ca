"""`diskinfo pack` onto a real filesystem that fills up: a one-line error, no partial shard,
finished shards intact, and a resume once there is room again."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root"),
]


@contextlib.contextmanager
def tmpfs(mount: Path, size: str) -> Iterator[Path]:
    mount.mkdir()
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(mount)], check=True
    )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    with tmpfs(tmp_path / "small", "1m") as mount:
        yield mount


def run_pack(src: Path, dest: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "diskinfo.cli",
            "pack",
            str(src),
            str(dest),
            "--shard-size",
            "300KB",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_out_of_space_then_resume(tmp_path: Path, small_fs: Path) -> None:
    rng = random.Random(0)
    for cls in ("a", "b"):
        (tmp_path / "src" / cls).mkdir(parents=True)
        for i in range(60):
            (tmp_path / "src" / cls / f"{i:03d}.bin").write_bytes(rng.randbytes(20_000))
    dest = small_fs / "shards"  # 2.4 MB of samples onto a 1 MiB filesystem

    proc = run_pack(tmp_path / "src", dest)
    assert proc.returncode != 0
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("diskinfo: error: out of disk")
    assert "re-run the same command to resume" in proc.stderr
    names = sorted(os.listdir(dest))
    assert not [n for n in names if n.endswith(".tmp")], names  # no half-written shard
    assert "manifest.json" not in names
    state = json.loads((dest / ".diskinfo-pack-state.json").read_text())
    finished = state["done"]
    # pack reads SRC into per-shard spills before it writes a shard, so a disk that cannot
    # hold the data runs out before any shard is finished: then there is nothing to keep
    assert sorted(finished) == [n for n in names if n.endswith(".tar")]
    kept = {}
    for name, record in finished.items():
        data = (dest / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == record["sha256"]
        kept[name] = (dest / name).stat().st_ino

    subprocess.run(["mount", "-o", "remount,size=8m", str(small_fs)], check=True)
    proc = run_pack(tmp_path / "src", dest)
    assert proc.returncode == 0, proc.stderr
    if finished:
        assert f"resuming: {len(finished)} finished shards kept" in proc.stderr
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["samples"] == 120
    assert all((dest / name).stat().st_ino == ino for name, ino in kept.items())
    assert sorted(os.listdir(dest)) == sorted(
        ["manifest.json"] + [s["name"] for s in manifest["shards"]]
    )


def test_out_of_space_while_listing_src(tmp_path: Path) -> None:
    """The list of SRC's files is sorted in temporary files beside DEST before any shard is
    planned: a disk too full for that is the same one line, not a bare errno."""
    src = tmp_path / "src"
    for cls in ("a", "b"):
        (src / cls).mkdir(parents=True)
        for i in range(3000):
            (src / cls / f"{i:05d}-{'x' * 40}.bin").write_bytes(b"")
    with tmpfs(tmp_path / "tiny", "4k") as mount:
        proc = run_pack(src, mount / "shards")
        assert proc.returncode != 0
        assert proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith(f"diskinfo: error: out of disk space in {mount} while")
        assert os.listdir(mount) == []  # the temporary files have no names; DEST not made
