"""`diskinfo pack`: layouts, manifest, determinism, resume, refusals and one-line errors."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diskinfo import cli
from diskinfo.errors import UserError
from diskinfo.shards import class_values, read_shard
from diskinfo.shards import pack as packmod
from diskinfo.shards.pack import STATE, pack, read_manifest, verify
from tests.helpers import ROOT, tools
from tests.helpers.cli import one_line_error


def image_folder(root: Path, classes: dict[str, int], seed: int = 1) -> dict[str, bytes]:
    """class/NNNN.jpg files of random sizes; returns {tar member name: bytes}."""
    rng = random.Random(seed)
    files = {}
    for name, count in classes.items():
        (root / name).mkdir(parents=True)
        for i in range(count):
            data = rng.randbytes(rng.randint(100, 6000))
            (root / name / f"{i:04d}.jpg").write_bytes(data)
            files[f"{name}/{i:04d}.jpg"] = data
    return files


def all_samples(dest: Path) -> list[dict]:
    """Every sample in stored order, with its `cls` wherever the pack keeps it."""
    manifest = read_manifest(dest)
    classes = class_values(manifest)
    return [
        s for shard in manifest["shards"] for s in read_shard(dest / shard["name"], None, classes)
    ]


def test_image_folder_round_trip(tmp_path: Path) -> None:
    files = image_folder(tmp_path / "src", {"dog": 25, "cat": 15})
    (tmp_path / "src" / "cat" / ".DS_Store").write_bytes(b"x")
    (tmp_path / "src" / "cat" / "LICENSE").write_bytes(b"x")
    os.mkfifo(tmp_path / "src" / "cat" / "9999.jpg")  # opening it would block: skipped
    manifest = pack(tmp_path / "src", tmp_path / "out", shard_size=20_000, shuffle_seed=None)
    assert manifest["samples"] == 40
    assert manifest["classes"] == ["cat", "dog"]
    assert manifest["class_counts"] == {"cat": 15, "dog": 25}
    assert manifest["extensions"] == {"jpg": 40}
    assert manifest["skipped"] == {"hidden": 1, "no_extension": 1, "not_regular": 1, "top_level": 0}
    assert len(manifest["shards"]) > 3
    assert sum(s["samples"] for s in manifest["shards"]) == 40
    assert max(s["samples"] for s in manifest["shards"]) - min(manifest["samples_per_shard"]) <= 1
    assert manifest["order"] == "sorted by key" and manifest["shuffle_seed"] is None
    samples = all_samples(tmp_path / "out")
    assert [s["__key__"] for s in samples] == sorted(k.removesuffix(".jpg") for k in files)
    for s in samples:
        assert s["jpg"] == files[s["__key__"] + ".jpg"]
        assert int(s["cls"]) == (0 if s["__key__"].startswith("cat/") else 1)
    for shard in manifest["shards"]:
        path = tmp_path / "out" / shard["name"]
        assert path.stat().st_size == shard["bytes"]
        assert hashlib.sha256(path.read_bytes()).hexdigest() == shard["sha256"]
        assert shard["bytes"] <= 20_000 or shard["samples"] == 1
    assert not list((tmp_path / "out").glob(".*"))  # no temp or state file left


def test_files_grouped_by_stem(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(7):
        (src / f"{i:04d}.jpg").write_bytes(bytes([i]) * 700)
        (src / f"{i:04d}.json").write_text(json.dumps({"i": i}))
        (src / f"{i:04d}.seg.png").write_bytes(b"p" * i)
    manifest = pack(src, tmp_path / "out", shuffle_seed=None)
    assert manifest["classes"] == [] and manifest["samples"] == 7
    assert len(manifest["shards"]) == 1
    samples = all_samples(tmp_path / "out")
    assert [s["__key__"] for s in samples] == [f"{i:04d}" for i in range(7)]
    assert all(set(s) == {"__key__", "__url__", "jpg", "json", "seg.png"} for s in samples)
    assert json.loads(samples[3]["json"]) == {"i": 3}
    assert samples[5]["seg.png"] == b"ppppp"


def test_deterministic_and_shuffle_seed(tmp_path: Path) -> None:
    image_folder(tmp_path / "src", {"a": 30, "b": 30})
    runs = {
        name: pack(tmp_path / "src", tmp_path / name, shard_size=30_000, shuffle_seed=seed)
        for name, seed in (("p1", None), ("p2", None), ("s1", 7), ("s2", 7), ("s3", 8))
    }

    def hashes(name: str) -> list[str]:
        return [s["sha256"] for s in runs[name]["shards"]]

    def keys(name: str) -> list[str]:
        return [s["__key__"] for s in all_samples(tmp_path / name)]

    assert hashes("p1") == hashes("p2")
    assert hashes("s1") == hashes("s2")
    assert keys("s1") != keys("p1") and sorted(keys("s1")) == keys("p1")
    assert keys("s3") != keys("s1") and sorted(keys("s3")) == keys("p1")


def test_refuses_existing_dest_without_force(tmp_path: Path) -> None:
    image_folder(tmp_path / "src", {"a": 5})
    pack(tmp_path / "src", tmp_path / "out")
    with pytest.raises(UserError, match="already holds a finished pack"):
        pack(tmp_path / "src", tmp_path / "out")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not empty"):
        pack(tmp_path / "src", tmp_path / "other")
    # --force replaces a pack's own files and leaves the user's alone
    (tmp_path / "out" / "shard-000099.tar").write_bytes(b"stale")
    (tmp_path / "out" / "notes.txt").write_text("mine")
    manifest = pack(tmp_path / "src", tmp_path / "out", force=True)
    assert not (tmp_path / "out" / "shard-000099.tar").exists()
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"
    assert manifest["samples"] == 5


def test_resume_keeps_finished_shards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    image_folder(tmp_path / "src", {"a": 40, "b": 20})
    real = packmod.write_shard
    calls = []

    def interrupted(dest: Path, name: str, samples: list, *args: object) -> dict:
        calls.append(name)
        if len(calls) == 3:
            (dest / f".{name}.1a2b3c4d.tmp").write_bytes(b"half a shard")  # as kill -9 leaves it
            (dest / f".{STATE}.5e6f7a8b.tmp").write_bytes(b'{"do')  # a state write cut off
            raise KeyboardInterrupt
        return real(dest, name, samples, *args)

    monkeypatch.setattr(packmod, "write_shard", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pack(tmp_path / "src", tmp_path / "out", shard_size=25_000)
    out = tmp_path / "out"
    assert (out / STATE).exists() and not (out / "manifest.json").exists()
    first = {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in out.glob("shard-*.tar")}
    assert sorted(first) == ["shard-000000.tar", "shard-000001.tar"]
    # other arguments than the interrupted run: refused, nothing touched
    with pytest.raises(UserError, match="interrupted pack of other input"):
        pack(tmp_path / "src", out, shard_size=50_000)

    monkeypatch.setattr(packmod, "write_shard", real)
    calls.clear()
    lines: list[str] = []

    class Capture:
        def write(self, text: str) -> None:
            lines.append(text)

        def flush(self) -> None: ...

        def isatty(self) -> bool:
            return False

    manifest = pack(tmp_path / "src", out, shard_size=25_000, stream=Capture())  # type: ignore[arg-type]
    assert any("resuming: 2 finished shards kept" in line for line in lines)
    for name, stamp in first.items():
        assert ((out / name).stat().st_ino, (out / name).stat().st_mtime_ns) == stamp
    assert manifest["samples"] == 60 and len(all_samples(out)) == 60
    assert not list(out.glob(".*"))
    fresh = pack(tmp_path / "src", tmp_path / "fresh", shard_size=25_000)
    assert [s["sha256"] for s in fresh["shards"]] == [s["sha256"] for s in manifest["shards"]]


def test_file_vanishing_mid_pack_leaves_no_partial_shard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image_folder(tmp_path / "src", {"a": 40})
    real_scan = packmod.scan

    def scan_then_delete(*args: object) -> packmod.Scan:
        found = real_scan(*args)  # type: ignore[arg-type]
        os.unlink(list(found.samples)[21].members[0].path)
        return found

    monkeypatch.setattr(packmod, "scan", scan_then_delete)
    with pytest.raises(UserError, match=r"cannot read .*a/\d+\.jpg: No such file"):
        pack(tmp_path / "src", tmp_path / "out", shard_size=25_000)
    # SRC is read before any shard is written: the state file alone, no spill, no shard
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [STATE]


def test_verify_catches_a_flipped_byte(tmp_path: Path) -> None:
    files = image_folder(tmp_path / "src", {"a": 3})
    pack(tmp_path / "src", tmp_path / "out", shuffle_seed=None)
    shard = tmp_path / "out" / "shard-000000.tar"
    expected = []
    for name in sorted(files):
        expected.append((name, len(files[name]), hashlib.sha256(files[name]).hexdigest()))
    assert verify(shard, expected) == read_manifest(tmp_path / "out")["shards"][0]["sha256"]
    data = bytearray(shard.read_bytes())
    data[512 + 10] ^= 0xFF  # inside the first member's data
    shard.write_bytes(bytes(data))
    with pytest.raises(UserError, match=r"verification failed at a/0000\.jpg"):
        verify(shard, expected)


def test_bad_input_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / ".hidden").write_text("x")
    assert "no samples in" in one_line_error(["pack", str(empty), str(tmp_path / "o1")], capsys)
    assert not (tmp_path / "o1").exists()

    src = tmp_path / "src"
    image_folder(src, {"a": 3})
    err = one_line_error(["pack", str(src), str(src / "a" / "shards")], capsys)
    assert "inside SRC" in err
    assert "not a directory" in one_line_error(["pack", str(tmp_path / "nope"), "x"], capsys)
    assert "not a size" in one_line_error(
        ["pack", str(src), str(tmp_path / "o2"), "--shard-size", "lots"], capsys
    )
    (src / "loose.JPG").write_bytes(b"x")
    err = one_line_error(["pack", str(src), str(tmp_path / "o3")], capsys)
    assert "a .jpg file at its top level" in err and "loose.JPG" in err
    (src / "loose.JPG").unlink()
    (src / "a" / "9999.jpg").symlink_to(tmp_path / "gone.jpg")
    err = one_line_error(["pack", str(src), str(tmp_path / "o4")], capsys)
    assert "cannot read" in err and "9999.jpg" in err


def test_linked_class_directories_are_classes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Datasets are often assembled from links to directories elsewhere; ImageFolder follows
    them (os.scandir's is_dir, os.walk followlinks=True), so the same tree must pack with the
    same classes and class numbers here, and a link back up must fail in one line, not loop."""
    src = tmp_path / "src"
    files = image_folder(src, {"cat": 3, "dog": 2})
    store = image_folder(tmp_path / "store", {"bird": 4})
    (src / "bird").symlink_to(tmp_path / "store" / "bird")
    (src / "dog" / "more").symlink_to(tmp_path / "store" / "bird")  # dog/more/0000.jpg ...
    classes = sorted(e.name for e in os.scandir(src) if e.is_dir())  # ImageFolder.find_classes
    manifest = pack(src, tmp_path / "out", shard_size=1 << 20, shuffle_seed=None)
    assert manifest["classes"] == classes == ["bird", "cat", "dog"]
    assert manifest["class_counts"] == {"bird": 4, "cat": 3, "dog": 6}
    got = {s["__key__"]: (int(s["cls"]), s["jpg"]) for s in all_samples(tmp_path / "out")}
    for name, data in store.items():
        assert got[name.removesuffix(".jpg")] == (0, data)
        assert got["dog/more/" + name.split("/")[1].removesuffix(".jpg")] == (2, data)
    assert got["cat/0000"] == (1, files["cat/0000.jpg"])

    (src / "cat" / "up").symlink_to(src)
    err = one_line_error(["pack", str(src), str(tmp_path / "o1")], capsys)
    assert "cat/up links back to" in err and "a directory it is in" in err
    (src / "cat" / "up").unlink()
    (tmp_path / "store" / "bird" / "loop").symlink_to(tmp_path / "store" / "bird")
    err = one_line_error(["pack", str(src), str(tmp_path / "o2")], capsys)
    assert "bird/loop links back to" in err
    (tmp_path / "store" / "bird" / "loop").unlink()
    (tmp_path / "elsewhere").mkdir()
    (src / "cat" / "out").symlink_to(tmp_path / "elsewhere")
    err = one_line_error(["pack", str(src), str(tmp_path / "elsewhere" / "o3")], capsys)
    assert "inside SRC" in err and "through the link" in err and "cat/out" in err
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()
    assert not list((tmp_path / "elsewhere").iterdir())


def test_files_beside_the_classes_are_left_out_as_imagefolder_leaves_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A dataset folder often holds labels.csv or a README beside its class directories;
    ImageFolder takes only the class directories, so pack takes the same samples with the same
    class numbers (it refused such a folder), and says in its output what it left out."""
    src = tmp_path / "src"
    files = image_folder(src, {"cat": 3, "dog": 2})
    (src / "labels.csv").write_text("file,label\n")
    (src / "README.md").write_text("# pets\n")
    (src / "cat" / ".DS_Store").write_bytes(b"x")
    classes = sorted(e.name for e in os.scandir(src) if e.is_dir())  # ImageFolder.find_classes
    assert cli.main(["pack", str(src), str(tmp_path / "out"), "--no-shuffle"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "left out: 2 files beside the class directories, 1 hidden file or directory; "
        "counts under `skipped` in the index"
    ), out
    manifest = read_manifest(tmp_path / "out")
    assert manifest["classes"] == classes == ["cat", "dog"]
    assert manifest["skipped"] == {"hidden": 1, "no_extension": 0, "not_regular": 0, "top_level": 2}
    got = {s["__key__"]: (int(s["cls"]), s["jpg"]) for s in all_samples(tmp_path / "out")}
    assert got == {
        name.removesuffix(".jpg"): (classes.index(name.split("/")[0]), data)
        for name, data in files.items()
    }

    (src / "README.md").unlink()
    (src / "labels.csv").unlink()
    (src / "cat" / ".DS_Store").unlink()
    capsys.readouterr()
    assert cli.main(["pack", str(src), str(tmp_path / "out3")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert not [line for line in lines if line.startswith("left out")]  # nothing left out


@pytest.mark.skipif(os.geteuid() != 0, reason="the owner is given only when run as root")
def test_a_root_pack_into_a_users_folder_leaves_the_users_files(tmp_path: Path) -> None:
    """`docker run --entrypoint diskinfo ... pack` runs as root: the shards it writes into the
    user's mounted data folder must stay the user's to move or delete."""
    image_folder(tmp_path / "src", {"a": 5, "b": 5})
    data = tmp_path / "data"
    data.mkdir()
    os.chown(data, 1234, 1234)
    dest = data / "packs" / "train-shards"
    pack(tmp_path / "src", dest, shards=2)
    made = [dest.parent, dest, *dest.iterdir()]
    assert len(made) == 5  # packs/, train-shards/, 2 shards and the manifest
    assert {(p.stat().st_uid, p.stat().st_gid) for p in made} == {(1234, 1234)}


def test_unreadable_file_one_line_error(tmp_path: Path) -> None:
    """Root reads every file, so as root the CLI runs without its DAC-override capabilities."""
    image_folder(tmp_path / "src", {"a": 4})
    (tmp_path / "src" / "a" / "0002.jpg").chmod(0o000)
    command = [sys.executable, "-m", "diskinfo.cli", "pack", str(tmp_path / "src"), "out"]
    if os.geteuid() == 0:
        setpriv = tools.find("setpriv")  # root: the only way to make a file unreadable
        command = [setpriv, "--bounding-set=-dac_override,-dac_read_search", *command]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode != 0
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "cannot read" in proc.stderr and "0002.jpg: Permission denied" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_long_and_unicode_names_round_trip(tmp_path: Path) -> None:
    """Names past tar's 100-byte field and non-ASCII names need PAX headers: still one sample
    per stem, same bytes, readable by webdataset too."""
    import webdataset as wds

    deep = tmp_path / "src" / "класс" / ("d" * 120)
    deep.mkdir(parents=True)
    (deep / "é.v2.jpg").write_bytes(b"a" * 1000)
    (deep / "é.v2.json").write_bytes(b"{}")
    (deep / (("x" * 150) + ".png")).write_bytes(b"b" * 10)
    manifest = pack(tmp_path / "src", tmp_path / "out")
    assert manifest["samples"] == 2 and manifest["classes"] == ["класс"]
    samples = {s["__key__"]: s for s in all_samples(tmp_path / "out")}
    key = f"класс/{'d' * 120}/é"
    assert samples[key]["v2.jpg"] == b"a" * 1000 and samples[key]["v2.json"] == b"{}"
    urls = [str(tmp_path / "out" / s["name"]) for s in manifest["shards"]]
    theirs = {s["__key__"]: s for s in wds.WebDataset(urls, shardshuffle=False)}
    assert set(theirs) == set(samples)
    assert theirs[key]["v2.jpg"] == b"a" * 1000


@pytest.mark.slow
def test_example_training_script_runs(tmp_path: Path) -> None:
    """examples/train_shards.py trains from packed PNGs with both readers (CPU torch)."""
    from PIL import Image

    for cls in ("cat", "dog"):
        (tmp_path / "src" / cls).mkdir(parents=True)
        for i in range(24):
            Image.new("RGB", (40, 30), (i * 10, 0, 0)).save(tmp_path / "src" / cls / f"{i}.png")
    pack(tmp_path / "src", tmp_path / "shards", shard_size=10_000)
    script = ROOT / "examples" / "train_shards.py"
    env = dict(os.environ, DISKINFO_STATE_DIR=str(tmp_path / "state"))
    for reader in ("diskinfo", "webdataset"):
        proc = subprocess.run(
            [
                *(sys.executable, str(script), str(tmp_path / "shards"), "--reader", reader),
                *("--workers", "2", "--classes", "2", "--batch-size", "8"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "epoch 0: 48 samples" in proc.stdout


class FakeStream:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None: ...

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    ("tty", "progress", "shown"),
    [(True, None, True), (False, None, False), (False, True, True), (True, False, False)],
)
def test_progress_bar_only_on_a_tty_or_asked(
    tmp_path: Path, tty: bool, progress: bool | None, shown: bool
) -> None:
    image_folder(tmp_path / "src", {"a": 12})
    stream = FakeStream(tty)
    pack(tmp_path / "src", tmp_path / "out", shard_size=20_000, progress=progress, stream=stream)  # type: ignore[arg-type]
    assert ("100% 12/12 samples" in stream.text) == shown
    if shown:
        assert stream.text.startswith("\r") == tty and stream.text.endswith("\n")


names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\0."),
    min_size=1,
    max_size=12,
).filter(lambda n: not n.startswith("."))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.tuples(names, names, st.sampled_from(["jpg", "json", "seg.png", "txt"])),
        st.binary(max_size=3000),
        min_size=1,
        max_size=25,
    ),
    st.integers(2_000, 40_000),
    st.one_of(st.none(), st.integers(0, 5)),
)
def test_any_tree_round_trips_exactly(files: dict, shard_size: int, seed: int | None) -> None:
    """Every file of any class/stem.ext tree comes back once, under its key, with its bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        expected = {}
        for (cls, stem, ext), data in files.items():
            if any(k[0] == cls and k[1] == stem and k[2].lower() == ext.lower() for k in expected):
                continue
            (root / "src" / cls).mkdir(parents=True, exist_ok=True)
            (root / "src" / cls / f"{stem}.{ext}").write_bytes(data)
            expected[(cls, stem, ext)] = data
        manifest = pack(root / "src", root / "out", shard_size=shard_size, shuffle_seed=seed)
        got = {}
        for shard in manifest["shards"]:
            for sample in read_shard(root / "out" / shard["name"], None, class_values(manifest)):
                cls, stem = sample["__key__"].split("/")
                assert int(sample.pop("cls")) == manifest["classes"].index(cls)
                for ext, data in sample.items():
                    if not ext.startswith("__"):
                        assert (cls, stem, ext) not in got
                        got[(cls, stem, ext)] = data
        assert got == {(c, s, e.lower()): d for (c, s, e), d in expected.items()}
        assert manifest["samples"] == len({(c, s) for c, s, _ in expected})


def test_summary_line_counts_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The line the user reads after packing: '1 shard', not '1 shards'; the rule applied."""
    image_folder(tmp_path / "src", {"a": 3, "b": 2})
    assert cli.main(["pack", str(tmp_path / "src"), str(tmp_path / "one")]) == 0
    out = capsys.readouterr().out
    assert (
        "packed 5 samples, 2 classes (in the keys; --labels member adds .cls members), "
        "shuffled, into 1 shard of 5 samples"
    ) in out, out
    assert "default: 1 shard, see docs/shards.md" in out, out
    assert "batch mix: " in out and "distinct classes per batch, a fully shuffled loader" in out
    assert cli.main(["pack", str(tmp_path / "src"), str(tmp_path / "two"), "--shards", "2"]) == 0
    assert "into 2 shards of 2-3 samples" in capsys.readouterr().out


def test_shard_bytes_are_what_tarfile_writes(tmp_path: Path) -> None:
    """The shard writer builds ustar headers itself (tarfile's header code cost more than
    reading the files): its bytes must stay those of tarfile's PAX format, long and
    non-ASCII names included."""
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    names = ["0001.jpg", "x" * 120 + ".jpg", "été.jpg", "0002.seg.png"]
    for i, name in enumerate(names):
        (src / "a" / name).write_bytes(bytes(range(256)) * (i + 1) + b"!" * i)
    os.utime(src / "a" / names[0], (0, 2**33 + 5))  # beyond the octal field: a pax mtime
    pack(src, tmp_path / "out", shuffle_seed=None, labels="member")  # other tars' readers
    expected = io.BytesIO()

    def add(tar: tarfile.TarFile, name: str, data: bytes, mtime: int) -> None:
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode, info.uname, info.gname = len(data), mtime, 0o644, "", ""
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(fileobj=expected, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for sample in packmod.scan(src).samples:
            for m in sample.members:
                add(tar, f"{sample.key}.{m.ext}", Path(m.path).read_bytes(), m.mtime)
            add(tar, f"{sample.key}.cls", b"0", max(m.mtime for m in sample.members))
    assert (tmp_path / "out" / "shard-000000.tar").read_bytes() == expected.getvalue()


def test_manifest_predicts_the_batch_mix_a_shard_dataset_gives(tmp_path: Path) -> None:
    from diskinfo.shards import ShardDataset

    image_folder(tmp_path / "src", {f"c{i:02d}": 30 for i in range(40)})
    mixed = pack(tmp_path / "src", tmp_path / "mixed", shards=8)["mixing"]
    # what the pack predicted from its plan is what reading the shards predicts
    read = ShardDataset(tmp_path / "mixed").mixing(mixed["batch_size"], mixed["num_workers"])
    assert mixed["distinct_classes"] == round(read.distinct, 2)
    assert mixed["shuffled_loader"] == round(read.shuffled, 2) and mixed["ratio"] > 0.9
    sorted_ = pack(tmp_path / "src", tmp_path / "sorted", shards=8, shuffle_seed=None)["mixing"]
    assert sorted_["ratio"] < mixed["ratio"] - 0.1


def test_manifest_gives_the_order_correlation_without_classes(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    for i in range(3000):
        (tmp_path / "src" / f"{i:05d}.txt").write_bytes(b"x")
    mixed = pack(tmp_path / "src", tmp_path / "mixed", shards=2)["mixing"]
    # one shard per worker in key order: only the shuffle buffer reorders them
    kept = pack(tmp_path / "src", tmp_path / "kept", shards=2, shuffle_seed=None)["mixing"]
    assert "distinct_classes" not in mixed
    assert abs(mixed["order_correlation"]) < 0.2 < 0.5 < kept["order_correlation"]


def test_pack_predicts_the_mix_without_importing_torch(tmp_path: Path) -> None:
    """torch's import alone costs seconds and a few hundred MB: more than packing 200,000
    files needs for itself."""
    image_folder(tmp_path / "src", {"a": 5, "b": 5})
    code = (
        "import sys; from diskinfo.pack import pack; "
        f"m = pack({str(tmp_path / 'src')!r}, {str(tmp_path / 'out')!r}); "
        "assert 'torch' not in sys.modules and m['mixing']['ratio'] > 0, m['mixing']"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=120)
