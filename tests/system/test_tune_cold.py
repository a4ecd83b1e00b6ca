"""`diskinfo tune --cold` on small files read from this machine's disk, the page cache dropped
before every setting: the staged pick is within 10% of the exhaustive run's best."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from diskinfo.tune import Options, tune
from tests.helpers.tune_judge import check_within

pytestmark = [
    pytest.mark.system,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="dropping the page cache needs root"),
]
FACTORY = "tests.helpers.tune_workloads:small_files"


@pytest.fixture
def small_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """6,000 files of 4-16 KB in 10 directories, on the root disk (not tmpfs: it must go cold)."""
    root = Path("/var/tmp") / f"diskinfo-tune-test-{os.getpid()}"
    rng = random.Random(0)
    for i in range(6000):
        folder = root / f"c{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:05d}.bin").write_bytes(rng.randbytes(rng.randint(4096, 16384)))
    monkeypatch.setenv("TUNE_FILES", str(root))
    yield root
    for path in sorted(root.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    root.rmdir()


def test_cold_small_files_pick_within_10_percent(small_files: Path) -> None:
    # 30 s, a quarter of the default budget, for the pick that is judged: at 8-10 s each cold
    # setting got one short pass and the pick fell 12-13% short of the best in one CI run in
    # three to five
    outcome = tune(Options(FACTORY, budget=30, cold=True))
    assert outcome.meta["cache"].startswith("cold") and not outcome.first_passes
    assert {r.cache for r in outcome.results} == {"cold"}
    # the files are read through tune's shuffled sampler: each batch a fully shuffled draw
    assert all(r.mix == {"fully_shuffled": True} for r in outcome.results), outcome.results
    # cold reads on a shared virtual disk vary by about 13% from one second to the next
    # (measured: the same setting, back to back), so more pairs than for warm workloads
    ratio, how = check_within(FACTORY, 30, rounds=11, staged=outcome, cold=True)
    assert ratio >= 0.9, how


def test_a_cold_setting_never_counts_a_sample_twice(small_files: Path) -> None:
    """The second read of a sample in one cold measurement would come from the cache just
    filled: each pass stops at one epoch, and a longer slot pools more cold passes."""
    from diskinfo.tune.grid import Setting
    from diskinfo.tune.load import call_factory, load_object
    from diskinfo.tune.runner import Runner

    name, make = load_object(FACTORY)
    work = call_factory(name, make)
    result = Runner(work, None, 64, 0.0, cold=True).measure(Setting(2, 2), 8.0)
    assert result.measurements >= 2, result
    assert result.samples <= len(work.dataset) * result.measurements, result
