"""tune/cap.py: a simulated step takes its share of the cores, so workers are not promised
what training cannot give them, and tune says so plainly when the step fills the cores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diskinfo import cli
from diskinfo.tune.cap import ceiling, for_runner, saturated
from diskinfo.tune.grid import Setting
from diskinfo.tune.runner import Result
from diskinfo.tune.table import gain, verdict
from tests.helpers.cli import one_line_error

STEP = 0.004  # s per sample of step (a 90 ms step, batch ~22)
LOAD = 0.004  # CPU s per sample of loading


def read_alone(workers: int, rate: float) -> Result:
    """A setting as a sleeping step measured it: its rate, and its loading's CPU."""
    s = Setting(workers, 2 if workers else None)
    return Result(s, int(rate * 10), 10.0, 0.1, None, 0.05, 1.0, "warm", load_cpu_s=LOAD)


def test_a_step_on_every_core_leaves_the_workers_nothing_to_hide_behind():
    """The walk's case on 2 cores: read beside a sleep, 2 workers ran 2x num_workers=0; with the
    step on both cores the loading cannot overlap it, and the predicted gain is 1.0."""
    zero, two = read_alone(0, 1 / (STEP + LOAD)), read_alone(2, 2 / (STEP + LOAD))
    assert gain(two, zero, None) == pytest.approx(2.0)
    cap = for_runner(cores=2, step_cpu=2.0, step_s=STEP)
    zero.ceiling, two.ceiling = cap(zero), cap(two)
    assert gain(two, zero, None) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("step_cpu", "expected"),
    [(0.0, 2.0), (1.0, 2.0), (1.5, 1 / (STEP + LOAD - 0.5 * STEP) * (STEP + LOAD)), (2.0, 1.0)],
)
def test_the_gain_shrinks_with_the_cores_the_step_leaves(step_cpu: float, expected: float):
    zero, two = read_alone(0, 1 / (STEP + LOAD)), read_alone(2, 2 / (STEP + LOAD))
    cap = for_runner(cores=2, step_cpu=step_cpu, step_s=STEP)
    zero.ceiling, two.ceiling = cap(zero), cap(two)
    assert gain(two, zero, None) == pytest.approx(expected)


def test_no_step_no_cap_and_no_workers_nothing_hidden():
    r = read_alone(2, 500)
    assert ceiling(r, 2, 0.0, 0.0) is None
    zero = read_alone(0, 100)
    assert ceiling(zero, 16, 0.0, STEP) == pytest.approx(1 / (STEP + LOAD))


def test_the_words_and_the_verdict_when_the_step_fills_the_cores():
    assert saturated(1.9, 2) == "more workers will not help: the step uses 1.9 of 2 cores"
    assert saturated(1.0, 2) is None
    zero, two = read_alone(0, 100), read_alone(2, 181)
    lines = verdict(two, zero, None, 64, saturated(2.0, 2))
    assert lines == [
        "best: the current setting (num_workers=0): more workers will not help: the step "
        "uses 2.0 of 2 cores (as measured, num_workers=2 prefetch_factor=2: 1.81x)"
    ]
    assert verdict(two, zero, None, 64)[0].startswith("best: num_workers=2")
    # capped below the current setting, the sentence still says why
    assert verdict(zero, zero, None, 64, saturated(2.0, 2)) == [
        "best: the current setting (num_workers=0): more workers will not help: the step "
        "uses 2.0 of 2 cores"
    ]


W = "tests.helpers.tune_workloads"


def test_the_users_step_runs_on_every_batch_and_its_cores_are_reported(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOG_DIR", raising=False)
    out_prefix = str(tmp_path / "t")
    code = cli.main(["tune", f"{W}:cpu_decode", "--step", f"{W}:busy_step", "--budget", "6",
                     "--max-workers", "1", "--out", out_prefix])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"step: {W}:busy_step on every batch (" in out
    document = json.loads((tmp_path / "t.json").read_text())
    assert document["step"] == f"{W}:busy_step" and document["step_cores"] > 0.05
    rows = document["results"]
    # the step's wall time and CPU are counted in every row, and nothing caps a real step
    assert all(r["step_s_per_sample"] > 0 and r["ceiling_samples_per_s"] is None for r in rows)
    # the step's time is in the loop: data-wait is no longer near 100% without workers
    zero = next(r for r in rows if r["setting"] == "num_workers=0")
    assert zero["data_wait_share"] < 0.97


def test_step_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def err(*args: str) -> str:
        return one_line_error(
            ["tune", f"{W}:cpu_decode", *args, "--budget", "3", "--out", str(tmp_path / "t")],
            capsys,
        )

    assert "the step failed under num_workers=0: ValueError: shapes" in err(
        "--step", f"{W}:failing_step"
    )
    assert f"{W} has no nostep" in err("--step", f"{W}:nostep")
    assert "give one of them" in err("--step", f"{W}:busy_step", "--step-ms", "5")
    assert "--step-cpu is the simulated step's CPU: it needs --step-ms" in err("--step-cpu", "1")
