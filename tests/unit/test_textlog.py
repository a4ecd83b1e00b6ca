"""sinks/textlog.py: the verdict lines of diskinfo.log and of `--console verdicts` ([Verdict] on
a change, [Summary], [Run] at the end), from records the Diagnoser judged."""

from __future__ import annotations

import io

import pytest

from diskinfo.analyse.diagnoser import Diagnoser
from diskinfo.record import (
    GpuFigures,
    LoaderFigures,
    ProcessIO,
)
from diskinfo.report import summarise
from diskinfo.sinks.textlog import TextLogSink
from tests.helpers.records import SMALL_FILE_READS, judged_record, loop_figures


def test_log_says_the_verdict_on_change_and_a_summary_and_console_keeps_only_those(tmp_path):
    echo = io.StringIO()
    sink = TextLogSink(str(tmp_path), echo=echo, console="verdicts", summary_s=20)
    diag = Diagnoser({}, hold=2, share_window=1)  # one odd interval decides on its own
    small = judged_record(loader=loop_figures(0.6, workers=2), devices=SMALL_FILE_READS)
    for i in range(8):
        r = small if i != 3 else judged_record(loader=loop_figures(0.01, workers=2))
        r.ts += 5 * i
        r.verdict = diag(r)
        sink.write(r)
    sink.close()
    log = (tmp_path / "diskinfo.log").read_text().splitlines()
    out = echo.getvalue().splitlines()
    assert sum("[Verdict]" in line for line in log) == 1  # one steady verdict: said once
    assert sum("[Summary]" in line for line in log) == 1
    assert any("[Interval] decided compute-bound (step); held" in line for line in log)
    assert any("[DiskIO] loop0" in line for line in log)
    kinds = ["[Verdict]", "[Note]", "[Summary]", "[Run]"]
    assert [line.split(" ", 2)[1] for line in out] == kinds
    assert all(line.endswith(f"(details: {tmp_path}/diskinfo.log)") for line in out)
    assert "[Summary] input-bound: small-file random reads for 25 s (75% of the last 4" in out[2]
    # the run in one line at the end, with the fix `report` would name for it
    run = out[3].split(" ", 1)[1]
    assert run.startswith("[Run] 40 s watched: input-bound: small-file random reads 100% | ")
    assert f"| a report with a timeline: diskinfo report {tmp_path}/diskinfo.jsonl" in run
    assert "| first fix to try: num_workers 2 -> 4: " in run
    assert log[-1].split(" ", 1)[1] == run.removesuffix(f" (details: {tmp_path}/diskinfo.log)")


def test_the_console_says_when_the_cause_changes_so_the_wrap_hint_reaches_docker_logs(tmp_path):
    """`unknown (starting)` becomes `unknown (not-wrapped)` after 60 s: the same verdict name,
    but the words that say what to do are new. Told only on a verdict-name change, the hint
    never reached `docker logs` before the 5-minute summary."""
    echo = io.StringIO()
    sink = TextLogSink(str(tmp_path), echo=echo, console="verdicts")
    diag = Diagnoser({}, hold=1)
    proc = [ProcessIO(pid=7, name="python", role="main", cpu_percent=100)]
    for i in range(14):  # 5 s each
        r = judged_record(procs=proc, wrapped_not_iterated=1)
        r.ts += 5 * i
        r.verdict = diag(r)
        sink.write(r)
    told = [line.split(" ", 1)[1] for line in echo.getvalue().splitlines()]
    assert [line.split(":")[0] for line in told] == ["[Verdict] unknown", "[Verdict] unknown"]
    assert "the training command started 5 s ago" in told[0]
    assert told[1].startswith(
        "[Verdict] unknown: the training process wrapped a loader with diskinfo.torch.watch "
        "but never iterated it after 60 s: the loop iterates another one"
    )
    assert "(cause was starting) | try: wrap the loader the loop iterates instead" in told[1]
    # the run's closing line names the same action as the one to try first
    sink.close()
    run = echo.getvalue().splitlines()[-1].split(" ", 1)[1]
    assert run.startswith(
        "[Run] 70 s watched: unknown 100% | first fix to try: wrap the loader the loop iterates"
    )


@pytest.mark.parametrize(
    ("measured", "wrap"),
    [(None, True), ("gpus", False), ("loader", False), ("procs", False)],
    ids=["nothing-measured", "gpu", "loop-figures", "no-command"],
)
def test_a_run_too_short_for_the_wrap_hint_ends_on_it(tmp_path, measured, wrap):
    """A first try of 30 s ends before the 60 s "wrap it" hint: its [Run] line said only
    "unknown 100%", nothing to do. With a command that nothing measured, it names the wrap."""
    echo = io.StringIO()
    sink = TextLogSink(str(tmp_path), echo=echo, console="verdicts")
    diag = Diagnoser({}, hold=1)
    extra = {
        "gpus": [GpuFigures(index=0, name="H100", util_mean=90.0, util_max=99.0)],
        "loader": LoaderFigures(batches=50, wait_s=0.1, step_s=4.9, wait_share=0.02),
        "procs": [],  # no training command at all
    }
    for i in range(6):  # 5 s each
        r = judged_record(procs=[ProcessIO(pid=7, name="python", role="main", cpu_percent=100)])
        if measured is not None:
            setattr(r, measured, extra[measured])
        r.ts += 5 * i
        r.verdict = diag(r)
        sink.write(r)
    sink.close()
    run = echo.getvalue().splitlines()[-1].split(" ", 1)[1]
    assert run.startswith("[Run] 30 s watched: "), run
    hint = " | first fix to try: wrap the DataLoader the loop iterates with diskinfo.torch.watch"
    assert (hint in run) == wrap, run
    assert "train for a minute" not in run  # six intervals: long enough to be judged


def test_a_run_that_ended_before_it_could_be_judged_says_run_longer(tmp_path):
    """The README's step 2 on a small train.py: the loop ran 26% of the monitor's first
    5 s interval, then ended; '[Run] 5 s watched: unknown 100%' left a first try with no
    word. The same line for report's top fix (one rule, VerdictTally)."""
    echo = io.StringIO()
    sink = TextLogSink(str(tmp_path), echo=echo, console="verdicts")
    diag = Diagnoser({}, hold=1)
    proc = [ProcessIO(pid=7, name="python", role="main", cpu_percent=100)]
    started = judged_record(procs=proc, loader=loop_figures(0.5))
    started.loader.wait_s = started.loader.step_s = 0.65  # 1.3 s of the 5 s interval
    ended = judged_record()  # the stop's last, partial interval: the command has exited
    ended.ts, ended.elapsed_s = started.ts + 0.4, 0.4
    records = [started, ended]
    for r in records:
        r.verdict = diag(r)
        sink.write(r)
    assert [r.verdict.verdict for r in records] == ["unknown", "idle"]  # held unknown at hold=2
    sink.close()
    run = echo.getvalue().splitlines()[-1].split(" ", 1)[1]
    assert run.startswith("[Run] 5 s watched: unknown 93%, idle 7% | first fix to try: train "
                          "for a minute or more: "), run  # fmt: skip
    assert "verdicts judge the ones after it (5 s each here)" in run
    summary = summarise(records)
    assert summary.top_fix is not None and summary.top_fix.startswith("train for a minute")


def test_no_run_line_without_a_sample(tmp_path):
    echo = io.StringIO()
    TextLogSink(str(tmp_path), echo=echo).close()
    assert echo.getvalue() == "" and not (tmp_path / "diskinfo.log").exists()


def test_unknown_console_is_refused(tmp_path):
    with pytest.raises(ValueError, match="console must be one of full, verdicts"):
        TextLogSink(str(tmp_path), console="loud")


def test_watch_console_verdicts_prints_only_the_verdict_lines(tmp_path):
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", "watch", str(tmp_path), "--interval", "0.2",
         "--count", "3", "--log-dir", str(tmp_path / "logs"), "--console", "verdicts"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out and out[0].split(" ", 2)[1] == "[Verdict]"  # the first held verdict, once
    assert not any("[DiskIO]" in line for line in out)
    assert all(line.endswith(f"(details: {tmp_path}/logs/diskinfo.log)") for line in out)
    assert "[DiskIO]" in (tmp_path / "logs" / "diskinfo.log").read_text()
    bad = subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", "watch", str(tmp_path), "--console", "loud"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "invalid choice: 'loud'" in bad.stderr


def test_the_log_writes_what_the_analysis_decided(tmp_path):
    """The sink decides nothing: it tells a change when the verdict's account says one
    happened (and from what), not by comparing verdicts itself, and sums what the accounts
    state over its summary period."""
    from diskinfo.analyse.account import HeldAccount
    from diskinfo.analyse.tally import VerdictTally
    from diskinfo.record import IntervalRecord, Verdict

    echo = io.StringIO()
    sink = TextLogSink(str(tmp_path), echo=echo, console="verdicts", summary_s=10)
    run = VerdictTally()
    accounts = [  # changed, was, agrees, data-wait seconds
        (False, None, True, None), (True, "compute-bound", True, None),
        (False, None, True, 1.0), (False, None, False, None),
    ]  # fmt: skip
    for i, (changed, was, agrees, waited) in enumerate(accounts):
        r = IntervalRecord(ts=1e9 + 5 * i, elapsed_s=5.0)
        r.verdict = Verdict("idle", summary="nothing ran", cause="no-training", held_s=5.0 * i)
        run.add(r, r.verdict)
        r.account = HeldAccount(changed, was, "", agrees, waited, run)
        sink.write(r)
    sink.close()
    told = [line.split(" ", 1)[1].split(" (details")[0] for line in echo.getvalue().splitlines()]
    assert told == [
        "[Verdict] idle: nothing ran (was compute-bound)",
        "[Summary] idle for 15 s (50% of the last 2 intervals decided it, data-wait 20% of step "
        "time): nothing ran",
        f"[Run] 20 s watched: idle 100% | a report with a timeline: diskinfo report "
        f"{tmp_path}/diskinfo.jsonl",
    ]
