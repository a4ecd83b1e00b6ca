"""`diskinfo pack` killed with SIGKILL at random moments: every shard left in DEST is whole,
a manifest only ever names shards that are there and whole, and the same command resumes to
the bytes an uninterrupted pack writes. Also: SRC is read in inode order, not shard order."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import diskinfo.shards.pack.spill as spillmod
from diskinfo.errors import UserError
from diskinfo.shards import read_shard
from diskinfo.shards.pack import MANIFEST, STATE, pack

ROOT = Path(__file__).resolve().parents[2]


def tree(root: Path, classes: int, per: int) -> None:
    rng = random.Random(3)
    for c in range(classes):
        (root / f"c{c:03d}").mkdir(parents=True)
        for i in range(per):
            (root / f"c{c:03d}" / f"{i:05d}.bin").write_bytes(
                rng.randbytes(rng.randint(1000, 8000))
            )


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def launch(src: Path, dest: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    code = "import sys; from diskinfo.cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", code, "pack", str(src), str(dest), "--shards", "24"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def check_whole(dest: Path, reference: dict[str, str]) -> int:
    """Every shard in DEST is byte for byte a finished one; a manifest names only those."""
    shards = sorted(dest.glob("shard-*.tar"))
    for shard in shards:
        assert sha(shard) == reference[shard.name], f"{shard.name} is partial"
    if (dest / MANIFEST).exists():
        for entry in json.loads((dest / MANIFEST).read_text())["shards"]:
            assert sha(dest / entry["name"]) == entry["sha256"]
    return len(shards)


def test_kill_9_at_random_moments_never_leaves_a_partial_shard(tmp_path: Path) -> None:
    src, dest = tmp_path / "src", tmp_path / "out"
    tree(src, 30, 100)
    reference = {s["name"]: s["sha256"] for s in pack(src, tmp_path / "ref", shards=24)["shards"]}
    rng = random.Random(7)
    kept = []
    for _ in range(6):
        proc = launch(src, dest)
        # a random moment: while SRC is read into the spills, or once some shards are written
        target = rng.randrange(0, 24)
        while proc.poll() is None and not (dest / STATE).exists():
            time.sleep(0.005)
        while proc.poll() is None and len(list(dest.glob("shard-*.tar"))) < target:
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.5 if target == 0 else 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        kept.append(check_whole(dest, reference))
        if (dest / MANIFEST).exists():
            break  # this one finished before the kill
    if not (dest / MANIFEST).exists():
        proc = launch(src, dest)
        assert proc.wait(timeout=300) == 0, proc.stderr.read() if proc.stderr else ""
    assert check_whole(dest, reference) == 24
    assert not [p.name for p in dest.iterdir() if p.name.startswith(".")]
    assert any(0 < k < 24 for k in kept), f"no kill landed mid-pack: shards kept {kept}"


def test_src_is_read_in_inode_order_and_shards_stay_shuffled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    tree(src, 10, 40)
    read: list[int] = []
    real = spillmod.open_source

    def recorded(path, owner):  # type: ignore[no-untyped-def]
        read.append(os.stat(path).st_ino)
        return real(path, owner)

    monkeypatch.setattr(spillmod, "open_source", recorded)
    manifest = pack(src, tmp_path / "out", shards=4)
    assert len(read) == 400
    assert read == sorted(read)  # one thread opens them, in the order they lie on disk
    for entry in manifest["shards"]:
        labels = [s["__key__"].split("/")[0] for s in read_shard(tmp_path / "out" / entry["name"])]
        assert len(set(labels)) == 10  # every shard a mix of all classes
        assert labels != sorted(labels)  # in shuffled order, not in the order read


def test_a_damaged_spill_is_an_error_not_a_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    tree(src, 2, 20)
    real = spillmod.Spill.finish

    def damaged(self: spillmod.Spill) -> None:
        self.out.flush()
        os.pwrite(self.fd, b"\xff\xff", spillmod.RECORD.size + 10)  # inside the first file
        real(self)

    monkeypatch.setattr(spillmod.Spill, "finish", damaged)
    with pytest.raises(UserError, match="changed in the spill file"):
        pack(src, tmp_path / "out", shards=2)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [STATE]


@pytest.mark.parametrize("change", [b"grown", b""])
def test_a_file_changed_while_waiting_to_be_read_fails_the_pack_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: bytes
) -> None:
    """Files are opened ahead of their turn: one rewritten after it was opened (grown, or
    emptied) is still judged by what it holds when read, the pack stops with one line, and
    neither a spill nor an open file is left behind."""
    src = tmp_path / "src"
    tree(src, 3, 20)
    real = spillmod.open_source
    opened: list[str] = []

    def rewritten(path, owner):  # type: ignore[no-untyped-def]
        fd = real(path, owner)
        opened.append(path)
        if len(opened) == 5:
            with open(path, "ab" if change else "wb") as handle:
                handle.write(change)
        return fd

    monkeypatch.setattr(spillmod, "open_source", rewritten)
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(UserError, match=r"(changed|shrank) while being packed; re-run"):
        pack(src, tmp_path / "out", shards=2)
    assert len(os.listdir("/proc/self/fd")) == fds
    assert not [p.name for p in (tmp_path / "out").iterdir() if "spill" in p.name]


def test_files_over_a_chunk_go_through_the_spill_whole(tmp_path: Path) -> None:
    """Files of more than a read (1 MiB) and more than is announced ahead (4 MiB) take the
    spill's chunked path, beside small ones: every shard holds every file's bytes as SRC
    does, in the shard's own order."""
    src = tmp_path / "src"
    rng = random.Random(9)
    sizes = [0, 1, 511, 512, (1 << 20) - 1, 1 << 20, (1 << 20) + 1, 3 << 20, (5 << 20) + 7]
    for c in ("a", "b"):
        (src / c).mkdir(parents=True)
        for i, size in enumerate(sizes):
            (src / c / f"{i:02d}.bin").write_bytes(rng.randbytes(size))
    manifest = pack(src, tmp_path / "out", shards=2)
    seen = {}
    for entry in manifest["shards"]:
        for sample in read_shard(tmp_path / "out" / entry["name"]):
            seen[sample["__key__"]] = sample["bin"]
    assert seen == {
        f"{c}/{i:02d}": (src / c / f"{i:02d}.bin").read_bytes()
        for c in ("a", "b")
        for i in range(len(sizes))
    }
