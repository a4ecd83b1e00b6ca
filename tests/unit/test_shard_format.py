"""The shard format, pinned: a golden pack (tests/fixtures/shards/) of a fixed tree, in both
`--labels` layouts. The writer must write those bytes and that manifest; the reader must read
them to the same samples. A format change that was meant is recorded on purpose:

    .venv/bin/python -m tests.unit.test_shard_format      # rewrites the golden pack

and the diff of tests/fixtures/shards/ shows what a reader of old packs now meets.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from diskinfo.errors import UserError
from diskinfo.shards import ShardDataset, read_shard
from diskinfo.shards.format import (
    CLASS,
    FORMAT,
    LABELS,
    MANIFEST,
    Manifest,
    class_values,
    label_bytes,
    member_name,
    shard_name,
    split_name,
)
from diskinfo.shards.pack import pack
from tests.helpers import ROOT

GOLDEN = ROOT / "tests/fixtures/shards"
MTIME = 1_700_000_000  # in every tar header: the tree's files get it
TREE = {  # class folder/key.ext -> bytes; two classes, a two-member sample, a long name
    "cat/0001.jpg": b"cat one",
    "cat/0001.json": b'{"w": 1}',
    "cat/0002.jpg": b"cat two" * 100,
    "dog/0001.jpg": b"dog one",
    "dog/" + "d" * 120 + ".jpg": b"a name longer than a ustar header holds",
    "dog/0003.png": b"\x89PNG dog three",
}
UNPINNED = ("source", "created")  # where and when: not the format


def make_tree(root: Path) -> Path:
    for name, data in TREE.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        os.utime(path, (MTIME, MTIME))
    return root


def write_golden(tmp: Path, out: Path) -> None:
    src = make_tree(tmp / "src")
    for labels in LABELS:
        dest = out / labels
        shutil.rmtree(dest, ignore_errors=True)
        pack(src, dest, shards=2, labels=labels, progress=False)
        manifest = json.loads((dest / MANIFEST).read_text())
        for key in UNPINNED:
            manifest[key] = "-"
        (dest / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


@pytest.mark.parametrize("labels", LABELS)
def test_the_writer_writes_the_golden_pack(tmp_path: Path, labels: str) -> None:
    write_golden(tmp_path, tmp_path / "out")
    got, want = tmp_path / "out" / labels, GOLDEN / labels
    assert sorted(p.name for p in got.iterdir()) == sorted(p.name for p in want.iterdir())
    assert (got / MANIFEST).read_text() == (want / MANIFEST).read_text()
    for shard in want.glob("*.tar"):
        assert (got / shard.name).read_bytes() == shard.read_bytes(), shard.name


@pytest.mark.parametrize("labels", LABELS)
def test_the_reader_reads_the_golden_pack(labels: str) -> None:
    manifest = Manifest.read(GOLDEN / labels)
    assert manifest.format == FORMAT and manifest.labels == labels
    assert manifest.classes == ["cat", "dog"] and manifest.samples == 5
    assert [s.name for s in manifest.shards] == [shard_name(0), shard_name(1)]
    samples = list(ShardDataset(GOLDEN / labels, train=False))
    assert len(samples) == manifest.samples
    by_key = {s["__key__"]: s for s in samples}
    for name, data in TREE.items():
        key, ext = split_name(name)
        assert by_key[key][ext] == data, name
        assert by_key[key][CLASS] == label_bytes(manifest.classes.index(key.split("/")[0]))
    members = [s for shard in manifest.shards for s in read_shard(GOLDEN / labels / shard.name)]
    assert all((CLASS in s) == (labels == "member") for s in members)


def test_the_manifest_reads_and_writes_the_same_json(tmp_path: Path) -> None:
    text = (GOLDEN / "key" / MANIFEST).read_text()
    manifest = Manifest.read(GOLDEN / "key")
    assert manifest.to_json() == json.loads(text)
    assert manifest["shards"][0]["name"] == shard_name(0)  # the dict users read before
    assert class_values(manifest) == {"cat": b"0", "dog": b"1"}
    manifest.write(tmp_path)
    assert (tmp_path / MANIFEST).read_text() == text


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"format": "diskinfo.pack/2"}, "is format diskinfo.pack/2; this diskinfo reads"),
        ({"format": "webdataset"}, "is not a diskinfo pack manifest"),
        ({"samples": "5"}, "a damaged diskinfo pack manifest"),
        ({"shards": [{"name": "../x.tar", "samples": 1, "bytes": 1, "sha256": ""}]}, "damaged"),
        ({"shards": [{"name": "x.tar"}]}, "a damaged diskinfo pack manifest"),
    ],
)
def test_a_manifest_of_another_format_is_one_line(tmp_path: Path, change: dict, error: str) -> None:
    data = {**json.loads((GOLDEN / "key" / MANIFEST).read_text()), **change}
    (tmp_path / MANIFEST).write_text(json.dumps(data))
    with pytest.raises(UserError, match=error.replace("(", r"\(")) as caught:
        Manifest.read(tmp_path)
    assert "\n" not in str(caught.value)


def test_member_names_split_back() -> None:
    for key, ext in [("cat/0001", "jpg"), ("a.b/c", "seg.png"), ("top", CLASS)]:
        assert split_name(member_name(key, ext)) == (key, ext)


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        write_golden(Path(tmp), GOLDEN)
    sys.stdout.write(f"rewrote {GOLDEN}\n")
