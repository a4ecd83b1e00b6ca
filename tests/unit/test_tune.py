"""`diskinfo tune`: the grid, bad input as one line, the CLI's table/JSON/PNG, and the staged
search against an exhaustive run of the same grid on the verdict benchmark's workloads."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
import torch.utils.data

from diskinfo import cli
from diskinfo.tune import parse_current
from diskinfo.tune.grid import Setting, full, ladder
from diskinfo.tune.load import Workload
from diskinfo.tune.runner import Runner
from tests.helpers.cli import one_line_error
from tests.helpers.tune_judge import check_within

W = "tests.helpers.tune_workloads"


def test_ladder_reaches_the_cores() -> None:
    assert ladder(1) == [0, 1]
    assert ladder(2) == [0, 1, 2]
    assert ladder(12) == [0, 1, 2, 4, 8, 12]
    assert ladder(16) == [0, 1, 2, 4, 8, 16]


def test_full_grid_has_one_point_without_workers() -> None:
    grid = full(2, gpu=False, shards=False)
    assert len(grid) == 1 + 2 * 2 * 2  # workers 1, 2 x prefetch 2, 4 x persistent
    assert Setting(0) in grid and not any(s.pin_memory or s.shards for s in grid)
    assert len(full(2, gpu=True, shards=True)) == 2 * 2 + 2 * 2 * 2 * 2 * 2


def test_replay_starts_the_same_permutation_again() -> None:
    """Cold settings read the same samples in the same order, each index once per pass."""
    from diskinfo.tune.runner import EndlessShuffle

    sampler = EndlessShuffle(50)
    stream = iter(sampler)
    first = [next(stream) for _ in range(50)]
    [next(stream) for _ in range(17)]
    sampler.replay()
    again = [next(stream) for _ in range(50)]
    assert sorted(first) == list(range(50)) and again == first


class Numbers(torch.utils.data.Dataset):
    """A map-style dataset of n samples: each is its own index."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if not 0 <= i < self.n:
            raise IndexError(f"sample {i} of {self.n}")
        return i


def test_map_style_shards_are_shuffled_over_their_own_length() -> None:
    """The shards' dataset may hold another number of samples than the files': each gets its
    own endless shuffle, so every shard sample is read and no index runs past the end."""
    runner = Runner(Workload(Numbers(50)), Workload(Numbers(7)), 4, 0.0, cold=False)
    seen: list[int] = []
    for batch in itertools.islice(runner.loader(Setting(0, shards=True)), 7):
        seen += batch.tolist()
    assert set(seen) == set(range(7)) and len(seen) == 28
    files = [i for b in itertools.islice(runner.loader(Setting(0)), 13) for i in b.tolist()]
    assert set(files[:50]) == set(range(50))  # the files' own permutation, unchanged
    result = runner.measure(Setting(1, 2, shards=True), 1.0)  # with a restart: epoch's end
    assert result.samples > 0


class Busy(torch.utils.data.IterableDataset):
    """An iterable dataset whose epoch is short (40 samples, each 2 ms of CPU, shared by the
    workers): a measurement of a second or two runs through many epochs."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        info = torch.utils.data.get_worker_info()
        me, every = (info.id, info.num_workers) if info else (0, 1)
        for i in range(me, 40, every):
            until = time.thread_time() + 0.002
            while time.thread_time() < until:
                pass
            yield i


@pytest.mark.parametrize("persistent", [False, True])
def test_cpu_per_worker_counts_every_epochs_workers(persistent: bool) -> None:
    """An iterable dataset's epoch that ends within the measurement starts new workers (unless
    persistent): the CPU of the workers that ended counts too. Counting only the last epoch's
    workers gave 3% per worker for shards read flat out by two workers."""
    runner = Runner(Workload(Busy()), None, 4, 0.0, cold=False)
    result = runner.measure(Setting(2, 2, persistent_workers=persistent), 2.0)
    # two workers reading flat out on at least one core between them
    assert result.cpu_per_worker > 0.3, result


def test_one_first_pass_cut_short_leaves_the_cache_partly_warm() -> None:
    runner = Runner(Workload(Numbers(50)), Workload(Numbers(7)), 4, 0.0, cold=False)
    assert not runner.first_pass(Setting(0), limit_s=0.0)["complete"]
    assert runner.first_pass(Setting(0), limit_s=60.0, shards=True)["complete"]
    assert runner.cache == "partly warm"  # the shards' complete pass does not hide it
    runner = Runner(Workload(Numbers(50)), Workload(Numbers(7)), 4, 0.0, cold=False)
    runner.first_pass(Setting(0), limit_s=60.0)
    runner.first_pass(Setting(0), limit_s=60.0, shards=True)
    assert runner.cache == "warm"


def test_a_short_look_at_close_settings_is_said() -> None:
    """Readings of 1.5 s vary 5-12%: two settings 4% apart are not told apart at that length,
    and the user is told so; 3 s readings, or a clear winner, need no note."""
    from diskinfo.tune.runner import Result
    from diskinfo.tune.table import caveat

    def result(setting: Setting, rate: float, seconds: float) -> Result:
        return Result(setting, int(rate * seconds), seconds, 0.2, 0.1, 1.0, 0.9, "warm")

    fast, close, slow = Setting(2, 4), Setting(2, 2, True), Setting(0)
    short = [result(fast, 1400, 1.2), result(close, 1350, 1.2), result(slow, 600, 1.2)]
    (line,) = caveat(short, short[0], 4000, 20)
    assert "about 1.2 s of the 20 s budget" in line and "within 10%" in line
    assert "(1 more here)" in line and "--budget" in line
    long = [result(fast, 1400, 3.5), result(close, 1350, 3.5)]
    assert caveat(long, long[0], 4000, 120) == []
    apart = [result(fast, 1400, 1.2), result(slow, 600, 1.2)]
    assert caveat(apart, apart[0], 4000, 20) == []


def test_current_setting_parses() -> None:
    s = parse_current("num_workers=4,persistent_workers=true")
    assert s == Setting(4, 2, True)
    assert parse_current("") == Setting(0)


def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def err(*args: str) -> str:
        return one_line_error(
            ["tune", *args, "--budget", "5", "--out", str(tmp_path / "t")], capsys
        )

    assert "no module named 'nosuchmodule'" in err("nosuchmodule:make")
    assert "no such file" in err(str(tmp_path / "missing.py") + ":make")
    assert "expected MODULE:FACTORY" in err("train")
    assert f"{W} has no nothing" in err(f"{W}:nothing")
    assert "raised RuntimeError: no data mounted at /data" in err(f"{W}:raises")
    assert "returned list, not a torch Dataset or DataLoader" in err(f"{W}:not_a_dataset")
    assert "KeyError" in err(f"{W}:broken_sample")
    assert "--current: expected KEY=VALUE" in err(f"{W}:cpu_decode", "--current", "workers=2")
    assert "--batch-size must be at least 1" in err(f"{W}:cpu_decode", "--batch-size", "0")
    assert "--max-workers must be at least 0" in err(f"{W}:cpu_decode", "--max-workers", "-2")
    pack_dir = tmp_path / "nopack"
    pack_dir.mkdir()
    assert "not a finished `diskinfo pack` output" in err(
        f"{W}:cpu_decode", "--pack", str(pack_dir)
    )
    (tmp_path / "bad.py").write_text("import nosuchdependency\n")
    assert "importing" in err(str(tmp_path / "bad.py") + ":make")


def test_cli_prints_the_table_and_writes_json_and_png(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOG_DIR", raising=False)
    code = cli.main(["tune", f"{W}:too_few_workers", "--budget", "8", "--out", str(tmp_path / "t")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "samples/s" in out and "data-wait" in out and "CPU/worker" in out
    assert "num_workers=0" in out and "(current)" in out and "\nbest: " in out
    # the way to check the gain in training names a command that exists: both runs in one
    # logs folder, the last two compared (it said `report before.jsonl after.jsonl`)
    assert "`diskinfo report /workspace/logs/diskinfo.jsonl --run prev,last`" in out
    document = json.loads((tmp_path / "t.json").read_text())
    assert document["current"] == "num_workers=0" and document["batch_size"] == 32
    # 4,000 samples of 3 ms do not fit a first pass of a quarter of 8 s: said, not hidden
    assert document["cache"] == "partly warm after a first pass over the data"
    assert document["first_passes"][0]["complete"] is False
    assert {r["setting"] for r in document["results"]} >= {"num_workers=0", document["best"]}
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    rate = {r["setting"]: r["epoch_samples_per_s"] for r in document["results"]}
    gain = rate[document["best"]] / rate["num_workers=0"]  # the table's "vs current"
    assert document["gain_over_current"] == pytest.approx(gain, abs=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("factory", ["too_few_workers", "cpu_decode"])
def test_staged_pick_within_10_percent_of_exhaustive_best(factory: str) -> None:
    """At a 20 s budget (the default is 120 s), about 1.5 s per setting."""
    ratio, how = check_within(f"{W}:{factory}", 20)
    assert ratio >= 0.9, how


def test_pack_adds_the_shards_to_the_grid(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from diskinfo.shards.pack import pack

    for i in range(400):
        (tmp_path / "src" / f"c{i % 4}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / f"c{i % 4}" / f"{i:04d}.bin").write_bytes(bytes(1000))
    pack(tmp_path / "src", tmp_path / "shards")
    monkeypatch.setenv("TUNE_FILES", str(tmp_path / "src"))
    out = str(tmp_path / "t")
    args = ["tune", f"{W}:files_or_shards", "--pack", str(tmp_path / "shards"), "--budget", "10"]
    assert cli.main([*args, "--out", out]) == 0
    data = json.loads((tmp_path / "t.json").read_text())
    rows = data["results"]
    assert any(r["shards"] for r in rows) and any(not r["shards"] for r in rows)
    (chosen,) = [r for r in rows if r["setting"] == data["best"]]
    assert chosen["measurements"] >= 2, chosen  # the pick never rests on one reading
    # each setting's batch mix beside its rate: the shards' as ShardDataset.mixing predicts
    # it for the setting's workers, the files' read through tune's shuffled sampler
    for r in rows:
        if not r["shards"]:
            assert r["batch_mix"] == {"fully_shuffled": True}, r
            continue
        m = r["batch_mix"]
        assert m["num_workers"] == r["loader_kwargs"]["num_workers"] and m["batch_size"] == 64
        assert m["shuffled_loader"] == pytest.approx(4.0, abs=0.01), m  # 4 classes, batch 64
        assert 0 < m["ratio"] <= 1.0 and m["shuffle_buffer"] == 1000, m
    text = capsys.readouterr().out
    (head,) = [line for line in text.splitlines() if line.startswith("setting ")]
    assert head.index("over epoch") < head.index("batch mix") < head.index("start s"), head
    assert "/4.0 cls" in text and "shuffled" in text and "\nbatch mix: distinct classes" in text
    assert ("batch mix of the pick: " in text) == chosen["shards"], text
    assert "--pack needs" in one_line_error(
        ["tune", f"{W}:cpu_decode", "--pack", str(tmp_path / "shards"), "--out", out], capsys
    )
    # shards named as ShardDataset takes them pass the check too; a name for nothing does not
    glob = str(tmp_path / "shards" / "shard-*.tar")
    assert "--pack needs" in one_line_error(
        ["tune", f"{W}:cpu_decode", "--pack", glob, "--out", out], capsys
    )
    assert "no file matches" in one_line_error(
        ["tune", f"{W}:cpu_decode", "--pack", glob + ".gz", "--out", out], capsys
    )


def test_the_batch_mix_is_shard_dataset_mixing_for_each_workers_count(tmp_path: Path) -> None:
    """One implementation: what tune shows for a setting is ShardDataset.mixing for its
    num_workers; a map-style dataset is read through tune's shuffled sampler; an
    IterableDataset whose order tune cannot know says nothing; shards without class labels
    get the order correlation with the samples' key order."""
    import io
    import tarfile

    from diskinfo.shards import ShardDataset
    from diskinfo.shards.pack import pack
    from diskinfo.tune import mix
    from tests.helpers.tune_workloads import Decode

    for i in range(400):
        (tmp_path / "src" / f"c{i % 4}").mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / f"c{i % 4}" / f"{i:04d}.bin").write_bytes(bytes(10))
    pack(tmp_path / "src", tmp_path / "shards", shards=8, shuffle_seed=None)  # key order
    ds = ShardDataset(str(tmp_path / "shards"), shuffle_buffer=20)
    found = mix.mixes(ds, 16, [0, 1, 2, 4])
    for workers, got in found.items():
        want = ds.mixing(16, workers)
        assert got["distinct_classes"] == round(want.distinct, 2), (workers, got, want)
        assert got["ratio"] == round(want.ratio, 3) and got["batches"] == want.batches
    assert all(m["ratio"] < 0.7 for m in found.values()), found  # classes in runs: unmixed
    assert mix.cell(found[0]).endswith("/4.0 cls") and mix.cell(None) == "-"

    assert mix.mixes(Decode(), 16, [0, 2]) == {w: {"fully_shuffled": True} for w in (0, 2)}

    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(10))

    assert mix.mixes(Stream(), 16, [0]) == {}

    paths = []
    for n in range(2):  # keys k000..k099 in order, no `cls` member
        paths.append(str(tmp_path / f"plain-{n}.tar"))
        with tarfile.open(paths[-1], "w") as tar:
            for k in range(50 * n, 50 * n + 50):
                info = tarfile.TarInfo(f"k{k:03d}.bin")
                info.size = 4
                tar.addfile(info, io.BytesIO(bytes(4)))
    plain = ShardDataset(paths, shuffle_buffer=0, shuffle_shards=False)
    (got,) = mix.mixes(plain, 8, [0]).values()
    assert got["order_correlation"] == 1.0 and mix.cell(got) == "rho +1.00", got
    shuffled = ShardDataset(paths)  # the training defaults: shard order and buffer shuffled
    (got,) = mix.mixes(shuffled, 8, [0]).values()
    assert abs(got["order_correlation"]) < 0.5, got
