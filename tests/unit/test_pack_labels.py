"""`diskinfo pack --labels key`, the default: the class stays in each sample's key instead of a
`.cls` member (`--labels member`), and ShardDataset gives the same `cls` from the manifest. On
1-8 kB samples the member is a sixth of the shard's bytes and half its tar headers; the
samples a training loop sees must not change."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from diskinfo import cli
from diskinfo.errors import UserError
from diskinfo.shards import ShardDataset, ShardError, read_shard
from diskinfo.shards import pack as packmod
from diskinfo.shards.dataset import shard_labels
from diskinfo.shards.format import FORMAT
from diskinfo.shards.pack import STATE, pack, read_manifest
from diskinfo.shards.pack.plan import fingerprint
from tests.helpers.cli import one_line_error
from tests.unit.test_pack import image_folder


def plain(sample: dict) -> dict:
    return {k: v for k, v in sample.items() if k != "__url__"}


def test_key_labels_give_the_samples_the_member_gives(tmp_path: Path) -> None:
    image_folder(tmp_path / "src", {"cat": 30, "dog": 20, "emu": 25})
    member = pack(tmp_path / "src", tmp_path / "member", shards=4, labels="member")
    key = pack(tmp_path / "src", tmp_path / "key", shards=4)
    assert member["labels"] == "member" and key["labels"] == "key"
    assert key["classes"] == ["cat", "dog", "emu"] and key["mixing"] == member["mixing"]
    for a, b in zip(member["shards"], key["shards"], strict=True):
        assert (a["samples"], a["first_key"], a["last_key"]) == (
            b["samples"],
            b["first_key"],
            b["last_key"],
        )
        assert b["bytes"] < a["bytes"]  # a header and a padded block less per sample
        with tarfile.open(tmp_path / "key" / b["name"]) as tar:
            names = tar.getnames()
        assert names and not any(n.endswith(".cls") for n in names)
    for train in (False, True):
        want = [plain(s) for s in ShardDataset(tmp_path / "member", train=train)]
        got = [plain(s) for s in ShardDataset(tmp_path / "key", train=train)]
        assert got == want and len(got) == 75
    assert {s["cls"] for s in want} == {b"0", b"1", b"2"}
    # what tune and ShardDataset.mixing read: the labels, without reading a member's bytes
    assert shard_labels(ShardDataset(tmp_path / "key")) == shard_labels(
        ShardDataset(tmp_path / "member")
    )
    assert ShardDataset(tmp_path / "key").mixing(8, 2) == ShardDataset(tmp_path / "member").mixing(
        8, 2
    )


def test_key_label_shards_are_deterministic_tars(tmp_path: Path) -> None:
    """The same bytes every run, and what tarfile writes for the same members: webdataset
    reads them (its `cls` then has to come from `__key__`, as docs/shards.md shows)."""
    image_folder(tmp_path / "src", {"a": 4, "b": 3})
    one = pack(tmp_path / "src", tmp_path / "one", shuffle_seed=None, labels="key")
    two = pack(tmp_path / "src", tmp_path / "two", shuffle_seed=None, labels="key")
    assert [s["sha256"] for s in one["shards"]] == [s["sha256"] for s in two["shards"]]
    expected = io.BytesIO()
    with tarfile.open(fileobj=expected, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for sample in packmod.scan(tmp_path / "src").samples:
            for m in sample.members:
                info = tarfile.TarInfo(f"{sample.key}.{m.ext}")
                info.size, info.mtime, info.mode, info.uname, info.gname = (
                    m.size,
                    m.mtime,
                    0o644,
                    "",
                    "",
                )
                tar.addfile(info, io.BytesIO(Path(m.path).read_bytes()))
    shard = (tmp_path / "one" / "shard-000000.tar").read_bytes()
    assert shard == expected.getvalue()
    assert hashlib.sha256(shard).hexdigest() == one["shards"][0]["sha256"]
    # the tars named one by one or by a pattern: the manifest beside them gives `cls`
    tars = sorted(str(p) for p in (tmp_path / "one").glob("shard-*.tar"))
    want = [s["cls"] for s in ShardDataset(tmp_path / "one", train=False)]
    assert [s["cls"] for s in ShardDataset(tars, train=False)] == want
    assert [s["cls"] for s in ShardDataset(str(tmp_path / "one" / "*.tar"), train=False)] == want
    assert {s["cls"] for s in ShardDataset(tars[:1], train=False)} <= {b"0", b"1"}
    # copied away from it, or mixed with a tar it does not list: samples as they are
    (tmp_path / "away").mkdir()
    (tmp_path / "away" / "shard-000000.tar").write_bytes(shard)
    assert all("cls" not in s for s in ShardDataset(tmp_path / "away" / "shard-000000.tar"))
    (tmp_path / "one" / "extra.tar").write_bytes(shard)
    assert all("cls" not in s for s in ShardDataset(str(tmp_path / "one" / "*.tar")))


def test_key_labels_with_shard_size_count_the_smaller_tars(tmp_path: Path) -> None:
    image_folder(tmp_path / "src", {"a": 40, "b": 40})
    member = pack(tmp_path / "src", tmp_path / "member", shard_size=60_000, labels="member")
    key = pack(tmp_path / "src", tmp_path / "key", shard_size=60_000)
    assert all(s["bytes"] <= 60_000 for s in key["shards"])
    assert len(key["shards"]) <= len(member["shards"])


def test_resume_needs_the_same_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image_folder(tmp_path / "src", {"a": 40, "b": 20})
    real = packmod.write_shard
    calls: list[str] = []

    def interrupted(dest: Path, name: str, *args: object) -> dict:
        calls.append(name)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(dest, name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(packmod, "write_shard", interrupted)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):  # as a pack started before key was the default
        pack(tmp_path / "src", out, shards=6, labels="member")
    monkeypatch.setattr(packmod, "write_shard", real)
    assert (out / STATE).exists()
    with pytest.raises(UserError, match=r"made with --labels member; re-run with --labels memb"):
        pack(tmp_path / "src", out, shards=6)  # the default, key: other shards
    manifest = pack(tmp_path / "src", out, shards=6, labels="member")
    fresh = pack(tmp_path / "src", tmp_path / "fresh", shards=6, labels="member")
    assert [s["sha256"] for s in manifest["shards"]] == [s["sha256"] for s in fresh["shards"]]
    assert read_manifest(out)["labels"] == "member"
    calls.clear()
    monkeypatch.setattr(packmod, "write_shard", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pack(tmp_path / "src", out, shards=6, force=True)
    monkeypatch.setattr(packmod, "write_shard", real)
    with pytest.raises(UserError, match=r"made with --labels key; re-run with --labels key"):
        pack(tmp_path / "src", out, shards=6, labels="member")
    with pytest.raises(UserError, match="the shard count, the shuffle seed or --labels changed"):
        pack(tmp_path / "src", out, shards=5)  # another plan altogether: no option to name
    assert pack(tmp_path / "src", out, shards=6)["labels"] == "key"


def test_a_member_plan_keeps_its_fingerprint() -> None:
    """A pack interrupted before --labels existed (it wrote members) resumes with
    --labels member: that value adds nothing to the fingerprint."""
    digest = "ab" * 32
    old = hashlib.sha256(json.dumps([FORMAT, 8, 0, digest]).encode()).hexdigest()
    assert fingerprint(digest, 8, 0, "member") == old
    assert fingerprint(digest, 8, 0, "key") != old


def test_cli_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    image_folder(tmp_path / "src", {"a": 3, "b": 2})
    assert cli.main(["pack", str(tmp_path / "src"), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "packed 5 samples, 2 classes (in the keys; --labels member adds .cls members), " in out
    assert read_manifest(tmp_path / "out")["labels"] == "key"
    argv = ["pack", "--labels", "member", str(tmp_path / "src"), str(tmp_path / "member")]
    assert cli.main(argv) == 0
    assert "packed 5 samples, 2 classes, shuffled" in capsys.readouterr().out
    assert read_manifest(tmp_path / "member")["labels"] == "member"
    err = one_line_error(["pack", "--labels", "folder", str(tmp_path / "src"), "x"], capsys)
    assert "--labels" in err and "member" in err and "key" in err
    with pytest.raises(UserError, match="--labels must be one of member, key"):
        pack(tmp_path / "src", tmp_path / "api", labels="name")


def test_a_key_outside_the_classes_is_a_shard_error(tmp_path: Path) -> None:
    """A tar added by hand to a key-labelled pack: one ShardError line, not a KeyError."""
    path = tmp_path / "odd.tar"
    with tarfile.open(path, "w") as tar:
        for name in ("a/0001.jpg", "zebra/0002.jpg", "loose.jpg"):
            info = tarfile.TarInfo(name)
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    samples = read_shard(path, classes={"a": b"0"})
    assert next(samples)["cls"] == b"0"
    with pytest.raises(ShardError, match="sample zebra/0002 is in no class folder"):
        next(samples)
    with pytest.raises(ShardError, match="sample loose is in no class folder"):
        list(read_shard(path, only=("cls",), classes={"zebra": b"1", "a": b"0"}))


def test_the_example_s_webdataset_reader_takes_the_class_from_the_key(tmp_path: Path) -> None:
    """examples/train_shards.py --reader webdataset on a key pack: without the manifest's
    classes every label would silently be 0."""
    import importlib.util

    from tests.helpers import ROOT

    spec = importlib.util.spec_from_file_location(
        "train_shards", ROOT / "examples" / "train_shards.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    for name, count in (("a", 6), ("b", 5), ("c", 4)):  # raw payloads: not decoded as images
        (tmp_path / "src" / name).mkdir(parents=True)
        for i in range(count):
            (tmp_path / "src" / name / f"{i}.bin").write_bytes(bytes([i]) * 100)
    labels = {}
    for kind in ("member", "key"):
        pack(tmp_path / "src", tmp_path / kind, shards=2, labels=kind)
        found = [label for _, label in example.dataset(str(tmp_path / kind), "webdataset", 0)]
        labels[kind] = sorted(found)
    assert labels["key"] == labels["member"] == [0] * 6 + [1] * 5 + [2] * 4
