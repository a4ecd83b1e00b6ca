"""ShardDataset splits shards over DataLoader workers and ranks: every sample once, none lost;
and the `webdataset` library reads the same shards."""

from __future__ import annotations

import functools
import gzip
import io
import random
import tarfile
from collections import Counter
from pathlib import Path

import pytest
import torch.utils.data
import webdataset as wds

from diskinfo.errors import UserError
from diskinfo.shards import (
    ShardDataset,
    class_values,
    read_shard,
    shardlist,
    split_name,
    tar_members,
    with_class,
)
from diskinfo.shards.pack import pack, read_manifest


@pytest.fixture(scope="module")
def packed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    """61 samples over a dozen shards of 5 or 6 samples, in key order."""
    root = tmp_path_factory.mktemp("shards")
    rng = random.Random(3)
    files = {}
    for cls in ("ant", "bee", "cow"):
        (root / "src" / cls).mkdir(parents=True)
        for i in range(20 + (cls == "bee")):
            data = rng.randbytes(rng.randint(200, 4000))
            (root / "src" / cls / f"{i:03d}.png").write_bytes(data)
            files[f"{cls}/{i:03d}"] = data
    manifest = pack(root / "src", root / "out", shards=12, shuffle_seed=None)
    assert manifest["samples_per_shard"] == [5, 6]
    return root / "out", files


def keys(dataset: torch.utils.data.Dataset, workers: int) -> Counter[str]:
    loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers)
    return Counter(sample["__key__"] for sample in loader)


@pytest.mark.parametrize("workers", [0, 1, 2, 4])
def test_every_sample_once_per_worker_count(packed, workers: int) -> None:
    dest, files = packed
    seen = keys(ShardDataset(dest), workers)
    assert seen == Counter(files.keys())


@pytest.mark.parametrize(("world", "workers"), [(2, 0), (2, 2), (3, 2)])
def test_ranks_are_disjoint_and_complete(packed, world: int, workers: int) -> None:
    dest, files = packed
    per_rank = [keys(ShardDataset(dest, rank=r, world_size=world), workers) for r in range(world)]
    assert all(per_rank), "a rank got nothing"
    assert sum(per_rank, Counter()) == Counter(files.keys())


def test_rank_from_torchrun_environment(packed, monkeypatch: pytest.MonkeyPatch) -> None:
    dest, files = packed
    monkeypatch.setenv("WORLD_SIZE", "2")
    shares = []
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        shares.append(keys(ShardDataset(dest), 0))
    assert shares[0] and shares[1] and shares[0] + shares[1] == Counter(files.keys())


def test_fewer_shards_than_readers_still_exact(packed) -> None:
    dest, _ = packed
    shards = [dest / s["name"] for s in read_manifest(dest)["shards"]][:2]
    expected = Counter(s["__key__"] for p in shards for s in read_shard(p))
    per_rank = [keys(ShardDataset(shards, rank=r, world_size=2), 2) for r in range(2)]
    assert all(per_rank) and sum(per_rank, Counter()) == expected
    with pytest.warns(UserWarning, match="2 shards for 4 readers"):
        per_rank = [keys(ShardDataset(shards, rank=r, world_size=4), 0) for r in range(4)]
    assert all(per_rank) and sum(per_rank, Counter()) == expected


def test_shuffled_shards_per_epoch_same_on_every_rank(packed) -> None:
    dest, files = packed
    orders = []
    for epoch in (0, 1):
        union: Counter[str] = Counter()
        for rank in range(2):
            ds = ShardDataset(dest, shuffle_shards=True, seed=5, rank=rank, world_size=2)
            ds.set_epoch(epoch)
            union += keys(ds, 2)
        assert union == Counter(files.keys())
        ds0 = ShardDataset(dest, shuffle_shards=True, seed=5)
        ds0.set_epoch(epoch)
        orders.append(ds0.shard_order())
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1])


def test_persistent_workers_reshuffle_by_themselves(packed) -> None:
    dest, files = packed
    ds = ShardDataset(dest, shuffle_shards=True, seed=1)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=None, num_workers=2, persistent_workers=True
    )
    epochs = [[s["__key__"] for s in loader] for _ in range(2)]
    assert epochs[0] != epochs[1]
    assert Counter(epochs[0]) == Counter(epochs[1]) == Counter(files.keys())


def test_a_watched_loader_moves_on_each_epoch_without_set_epoch(
    packed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch's default DataLoader starts its workers afresh each epoch from the main process's
    copy, so they cannot count passes: unwatched and without set_epoch every epoch reads the
    same order (documented); diskinfo.torch.watch counts them in the main process."""
    import diskinfo.torch as dt
    from diskinfo import loader_state

    monkeypatch.setenv(loader_state.STATE_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(dt, "_meter", None)
    dest, files = packed
    ds = ShardDataset(dest, shuffle_shards=True, seed=1)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    try:
        plain = [[s["__key__"] for s in loader] for _ in range(2)]
        assert plain[0] == plain[1]
        watched = [[s["__key__"] for s in dt.watch(loader)] for _ in range(3)]
        assert watched[0] == plain[0]  # the first pass is epoch 0
        assert watched[0] != watched[1] != watched[2] != watched[0]
        assert all(Counter(epoch) == Counter(files.keys()) for epoch in watched)
        pinned = []
        for _ in range(2):
            ds.set_epoch(7)  # an explicit epoch wins over the count
            pinned.append([s["__key__"] for s in dt.watch(loader)])
        assert pinned[0] == pinned[1] != watched[0]
    finally:
        if dt._meter is not None:
            dt._meter.close()


def test_contents_and_transform(packed) -> None:
    dest, files = packed
    ds = ShardDataset(dest, transform=lambda s: (s["__key__"], s["png"], int(s["cls"])))
    for key, data, label in ds:
        assert data == files[key]
        assert label == ["ant", "bee", "cow"].index(key.split("/")[0])


@pytest.mark.parametrize("labels", ["key", "member"])
def test_webdataset_reads_the_same_shards(packed, tmp_path: Path, labels: str) -> None:
    """The default pack's tars as docs/shards.md has webdataset read them, the class taken
    from `__key__` through the manifest; a pack made with --labels member has `cls` members."""
    dest, files = packed
    if labels == "member":
        dest = tmp_path / "member"
        pack(packed[0].parent / "src", dest, shards=12, shuffle_seed=None, labels="member")
    manifest = read_manifest(dest)
    assert manifest["labels"] == labels
    urls = [str(dest / s["name"]) for s in manifest["shards"]]
    dataset = wds.WebDataset(urls, shardshuffle=False)
    if (classes := class_values(manifest)) is not None:
        dataset = dataset.map(functools.partial(with_class, classes=classes))
    seen = {}
    for key, data, label in dataset.decode().to_tuple("__key__", "png", "cls"):
        seen[key] = data
        assert label == ["ant", "bee", "cow"].index(key.split("/")[0])
    assert seen == files


def test_split_name_matches_webdataset() -> None:
    from webdataset.tariterators import base_plus_ext

    for name in ("cat/0001.jpg", "0001.seg.png", "a.b/c/x.tar.gz", "k.JSON"):
        key, ext = base_plus_ext(name)
        assert split_name(name) == (key, ext.lower())


def test_bad_rank_arguments(packed) -> None:
    dest, _ = packed
    with pytest.raises(ValueError):
        ShardDataset(dest, rank=0)
    with pytest.raises(ValueError):
        ShardDataset(dest, rank=2, world_size=2)


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT, tarfile.PAX_FORMAT])
def test_tar_members_reads_what_tarfile_reads(tmp_path: Path, fmt: int) -> None:
    """Names in the ustar prefix field, GNU long names and pax paths; directories skipped."""
    names = ["a/0001.jpg", "d" * 90 + "/" + "e" * 90 + ".png", "f.bin"]
    if fmt != tarfile.USTAR_FORMAT:
        names.append("g" * 150 + ".json")
    if fmt == tarfile.PAX_FORMAT:
        names.append("класс/é.jpg")
    path = tmp_path / "t.tar"
    with tarfile.open(path, "w", format=fmt) as tar:
        info = tarfile.TarInfo("a")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
        for i, name in enumerate(names):
            data = bytes([i]) * (700 * i + 3)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    theirs = []
    with tarfile.open(path) as tar:
        for m in tar:
            if m.isfile():
                fh = tar.extractfile(m)
                assert fh is not None
                theirs.append((m.name, fh.read()))
    assert list(tar_members(path)) == theirs and len(theirs) == len(names)
    damaged = bytearray(path.read_bytes())
    damaged[600] ^= 0xFF  # inside the second header
    path.write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="damaged header"):
        list(tar_members(path))


@pytest.mark.parametrize("compress", [False, True])
def test_reads_shards_webdataset_wrote(tmp_path: Path, compress: bool) -> None:
    """Shards made elsewhere (webdataset's TarWriter, gzipped or not), named the ways a
    webdataset user names them, give what webdataset itself reads from them."""
    suffix = ".tar.gz" if compress else ".tar"
    rng = random.Random(5)
    for n in range(3):
        with wds.TarWriter(str(tmp_path / f"train-{n:06d}{suffix}"), compress=compress) as sink:
            for i in range(4):
                sink.write({"__key__": f"s{n}_{i}", "jpg": rng.randbytes(900), "cls": n})
    pattern = str(tmp_path / f"train-{{000000..000002}}{suffix}")
    expected = {
        key: (data, int(label))
        for key, data, label in wds.WebDataset(pattern, shardshuffle=False).to_tuple(
            "__key__", "jpg", "cls"
        )
    }
    assert len(expected) == 12
    one = str(tmp_path / f"train-000001{suffix}")
    for source, count in [
        (pattern, 12),
        (str(tmp_path / f"train-*{suffix}"), 12),
        ([one], 4),
        (one, 4),
    ]:
        got = {s["__key__"]: (s["jpg"], int(s["cls"])) for s in ShardDataset(source, train=False)}
        assert len(got) == count, source
        assert all(expected[k] == v for k, v in got.items()), source


def test_brace_patterns_expand_as_braceexpand_does() -> None:
    from braceexpand import braceexpand

    for pattern in (
        "shard-{000000..000146}.tar",
        "a{08..11}b{x,y}",
        "s{1..10..3}",
        "s{3..1}",
        "s{-02..2}",
        "s{0..4..0}",
        "{a..e}.tar",
        "x{e..a}",
        "a{,b}c",
        "s{}x",
        "s{one}x",
        "plain.tar",
    ):
        assert shardlist.expand(pattern) == list(braceexpand(pattern)), pattern


def test_sources_that_name_no_shard_fail_in_one_line(tmp_path: Path, packed) -> None:
    """Found when the dataset is made, not by a DataLoader worker mid-epoch."""
    dest, _ = packed
    (tmp_path / "dir").mkdir()
    cases = {
        str(tmp_path / "dir"): "no manifest.json in",
        str(tmp_path / "s-{0..2}.tar"): "no such shard: " + str(tmp_path / "s-0.tar") + " (from",
        str(tmp_path / "*.tar"): "no file matches",
        str(tmp_path / "gone.tar"): "no such shard: ",
    }
    for source, message in cases.items():
        with pytest.raises(UserError) as caught:
            ShardDataset(source)
        assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    first = str(dest / read_manifest(dest)["shards"][0]["name"])
    with pytest.raises(UserError, match="no such shard"):
        ShardDataset([first, str(tmp_path / "gone.tar")])


def test_damaged_shards_say_so(tmp_path: Path, packed) -> None:
    dest, _ = packed
    shard = (dest / read_manifest(dest)["shards"][0]["name"]).read_bytes()
    (tmp_path / "text.tar").write_bytes(b"not a tar at all " * 64)
    (tmp_path / "cut.tar.gz").write_bytes(gzip.compress(shard)[:1000])
    with pytest.raises(ValueError, match="not a tar file or a damaged header"):
        list(tar_members(tmp_path / "text.tar"))
    with pytest.raises(ValueError, match="damaged gzip data"):
        list(tar_members(tmp_path / "cut.tar.gz"))
    (tmp_path / "whole.tgz").write_bytes(gzip.compress(shard))
    assert list(tar_members(tmp_path / "whole.tgz")) == list(tar_members(dest / "shard-000000.tar"))
