"""`diskinfo report`: time-weighted verdict shares, top fix, throughput, data-wait, the PNG
timeline, the A/B comparison, and one-line errors for bad runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diskinfo import cli
from diskinfo.errors import UserError
from diskinfo.record import (
    DeviceFigures,
    GpuFigures,
    IntervalRecord,
    LoaderFigures,
    Verdict,
)
from diskinfo.report import load_run, summarise, text
from tests.helpers.cli import one_line_error
from tests.helpers.records import record, write_run

SMALL = "input-bound: small-file random reads"
PACK_FIX = "pack the small files into large sequential shards: `diskinfo pack SRC DEST`"
WORKERS_FIX = "raise DataLoader num_workers=0 to num_workers=2 (2 cores)"


def interval(
    ts: float,
    elapsed: float,
    verdict: str,
    fixes: list[str],
    *,
    r_s: float,
    rmb_s: float,
    wait: float,
    step: float,
    batches: int,
    gpu: float | None,
    warnings: list[str] | None = None,
) -> IntervalRecord:
    return record(
        DeviceFigures("vda", paths=["/data"], r_s=r_s, rmb_s=rmb_s, r_await=2.0, util=80.0),
        DeviceFigures("loop0", r_s=9999, rmb_s=999.0),  # not watched: must be ignored
        ts=ts,
        elapsed=elapsed,
        host="test",
        gpus=None if gpu is None else [GpuFigures(0, "H200", util_mean=gpu)],
        loader=LoaderFigures(
            batches=batches,
            wait_s=wait,
            step_s=step,
            wait_share=wait / (wait + step),
            batches_s=batches / elapsed,
        ),
        verdict=Verdict(verdict, fixes=fixes, warnings=warnings or []),
    )


def before_run(t0: float = 1_800_000_000.0, gpu: bool = True) -> list[IntervalRecord]:
    """15 s small-file bound (3 x 5 s) then 10 s compute-bound."""
    recs = [
        interval(
            t0 + 5 * (i + 1),
            5.0,
            SMALL,
            [PACK_FIX, WORKERS_FIX],
            r_s=2000,
            rmb_s=31.25,
            wait=3.5,
            step=1.5,
            batches=10,
            gpu=20.0 if gpu else None,
            warnings=["read rate under 30% of the device's bandwidth for 60 s"] if i else [],
        )
        for i in range(3)
    ]
    recs.append(
        interval(
            t0 + 25,
            10.0,
            "compute-bound",
            ["speed up the step"],
            r_s=100,
            rmb_s=50.0,
            wait=0.5,
            step=9.5,
            batches=40,
            gpu=90.0 if gpu else None,
        )
    )
    return recs


def after_run(t0: float = 1_800_003_600.0) -> list[IntervalRecord]:
    return [
        interval(
            t0 + 5 * (i + 1),
            5.0,
            "compute-bound",
            ["speed up the step"],
            r_s=400,
            rmb_s=200.0,
            wait=0.25,
            step=4.75,
            batches=30,
            gpu=95.0,
        )
        for i in range(5)
    ]


def test_summary_is_time_weighted() -> None:
    s = summarise(before_run(), "before")
    assert s.duration_s == 25.0 and s.intervals == 4
    assert s.verdict_shares == {SMALL: pytest.approx(0.6), "compute-bound": pytest.approx(0.4)}
    assert s.top_fix == PACK_FIX and s.top_fix_verdict == SMALL
    assert s.batches_s == pytest.approx(70 / 25)
    assert s.wait_share == pytest.approx((3 * 3.5 + 0.5) / 25)
    # busiest *watched* device; means weighted by interval length
    assert s.disk_read_mb_s == pytest.approx((15 * 31.25 + 10 * 50.0) / 25)
    assert s.disk_r_s == pytest.approx((15 * 2000 + 10 * 100) / 25)
    assert s.disk_rareq_kb == pytest.approx((15 * 31.25 + 500) * 1024 / (15 * 2000 + 1000))
    assert s.gpu_util == pytest.approx((15 * 20 + 10 * 90) / 25)
    assert s.warnings == {"read rate under 30% of the device's bandwidth for 60 s": 2}


def test_top_fix_prefers_input_bound_time() -> None:
    recs = before_run()[:1] + [before_run()[3]] * 3  # 5 s input-bound, 30 s compute-bound
    assert summarise(recs).top_fix == PACK_FIX
    assert summarise([before_run()[3]]).top_fix == "speed up the step"


DEMO_FIX = "num_workers 0 -> 2: loading and the step take turns in the training process"
STEP_FIX = "speed up the step"


def cpu_bound(at: float, workers: int, fix: str = DEMO_FIX) -> IntervalRecord:
    rec = interval(at, 5.0, "input-bound: cpu", [fix], r_s=10, rmb_s=1.0, wait=2.5,
                   step=2.5, batches=50, gpu=None)  # fmt: skip
    assert rec.loader is not None
    rec.loader.num_workers = workers
    return rec


def step_bound(at: float, workers: int) -> IntervalRecord:
    rec = interval(at, 5.0, "compute-bound", [STEP_FIX], r_s=10, rmb_s=1.0, wait=0.4,
                   step=4.6, batches=130, gpu=None)  # fmt: skip
    assert rec.loader is not None
    rec.loader.num_workers = workers
    return rec


def test_a_workers_fix_the_run_then_applied_is_not_the_top_fix() -> None:
    """The demo applies the fix it is given (num_workers 0 -> 2) and ends compute-bound: its
    [Run] line and report still named num_workers 0 -> 2 as the first fix to try. A workers
    fix advised only under other settings than the run's last, which have the workers it
    named, is left out; the held verdict outlasting the change by an interval is no advice."""
    demo = [cpu_bound(5 * i, 0) for i in range(4)] + [cpu_bound(20, 2)]  # held past the change
    demo += [step_bound(25 + 5 * i, 2) for i in range(3)]
    assert summarise(demo).top_fix == STEP_FIX
    # still input-bound at 2 workers, and advised anew there: the fix for now comes first
    again = cpu_bound(40, 2, "num_workers 2 -> 4: 2.0 of 4 cores are busy loading")
    assert summarise([*demo, again]).top_fix == again.verdict.fixes[0]  # type: ignore[union-attr]
    # the settings never changed: the input-bound fix stays first, as before
    assert summarise([cpu_bound(5 * i, 0) for i in range(4)] + [step_bound(20, 0)]).top_fix == (
        DEMO_FIX
    )


def test_an_applied_workers_fix_is_known_by_the_target_it_carries_not_its_words() -> None:
    """The verdict carries the num_workers its fix names: a fix worded any other way (no
    "num_workers W -> N" to read) is still known applied when the last loader has N."""
    from diskinfo.analyse.fix_ids import FixId

    reworded = "give the DataLoader two worker processes: loading and the step take turns"
    demo = [cpu_bound(5 * i, 0, reworded) for i in range(4)] + [step_bound(25, 2)]
    for rec in demo[:4]:
        rec.verdict = Verdict(  # type: ignore[union-attr]
            rec.verdict.verdict,  # type: ignore[union-attr]
            fixes=[reworded],
            fix_ids=[FixId.WORKERS],
            workers_target=2,
        )
    assert summarise(demo).top_fix == STEP_FIX
    for rec in demo[:4]:
        rec.verdict.workers_target = 4  # type: ignore[union-attr]  (not reached by 2)
    assert summarise(demo).top_fix == reworded


def test_a_validation_loader_ending_the_run_does_not_apply_a_workers_fix() -> None:
    """Training at 4 workers was advised 4 -> 8; the run ends in a wrapped validation loader at
    2 workers. Other settings, but not the fix: it stays the first to try."""
    fix = "num_workers 4 -> 8: 4.0 of 8 cores are busy loading"
    train = [cpu_bound(5 * i, 4, fix) for i in range(4)]
    assert summarise([*train, step_bound(20, 2), step_bound(25, 2)]).top_fix == fix


def test_report_one_run_prints_summary_and_writes_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "before.jsonl", before_run())
    assert cli.main(["report", str(run)]) == 0
    out = capsys.readouterr().out
    assert "60.0%  input-bound: small-file random reads" in out
    assert "40.0%  compute-bound" in out
    assert f"top fix: {PACK_FIX}" in out
    assert "2.80 batches/s" in out and "data-wait share: 44% of step time" in out
    assert "GPU: 48% mean utilisation over 1 GPU(s)" in out
    png = tmp_path / "before.png"
    assert f"timeline: {png}" in out
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


@pytest.mark.skipif(os.geteuid() != 0, reason="the owner is given only when run as root")
def test_a_root_report_in_a_users_directory_is_the_users_and_follows_no_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README step 4 runs `report` as root in the user's logs directory: the image is the
    directory owner's, and a link planted at its name is replaced, never written through."""
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chown(logs, 1234, 1234)
    run = write_run(logs / "diskinfo.jsonl", before_run())
    target = tmp_path / "root-owned"
    target.write_text("keep")
    (logs / "diskinfo.png").symlink_to(target)
    assert cli.main(["report", str(run)]) == 0
    png = logs / "diskinfo.png"
    assert not png.is_symlink() and png.read_bytes()[:4] == b"\x89PNG"
    assert (png.stat().st_uid, png.stat().st_gid) == (1234, 1234)
    assert target.read_text() == "keep"


def test_report_without_gpu_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path / "cpu.jsonl", before_run(gpu=False))
    png = tmp_path / "out" / "x.png"
    png.parent.mkdir()
    assert cli.main(["report", str(run), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "GPU: no figures in this run" in out
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_a_comparison_png_is_named_for_what_tells_the_runs_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every run's log is diskinfo.jsonl: naming the PNG from file names alone gave
    diskinfo-vs-diskinfo.png for every comparison."""
    from diskinfo.commands.report import default_png

    def png(*runs: str) -> str:
        return str(default_png([tmp_path / r for r in runs]).relative_to(tmp_path))

    assert png("before.jsonl", "after.jsonl") == "before-vs-after.png"
    assert png("before/diskinfo.jsonl", "after/diskinfo.jsonl") == "before/before-vs-after.png"
    assert png("a/logs/diskinfo.jsonl", "b/logs/diskinfo.jsonl") == "a/logs/a-vs-b.png"
    assert png("x/diskinfo.jsonl", "x/diskinfo.jsonl") == "x/diskinfo-vs-diskinfo.png"
    assert png("run.jsonl") == "run.png"
    monkeypatch.chdir(tmp_path)  # one given relative, one absolute: the same rule
    relative = Path("a/diskinfo.jsonl")
    assert default_png([relative, tmp_path / "b/diskinfo.jsonl"]) == Path("a/a-vs-b.png")


def test_comparing_two_runs_named_alike_writes_before_vs_after_png(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for run in ("before", "after"):
        (tmp_path / run).mkdir()
    a = write_run(tmp_path / "before" / "diskinfo.jsonl", before_run())
    b = write_run(tmp_path / "after" / "diskinfo.jsonl", after_run())
    assert cli.main(["report", str(a), str(b)]) == 0
    assert f"timeline: {tmp_path}/before/before-vs-after.png" in capsys.readouterr().out
    assert (tmp_path / "before" / "before-vs-after.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path / "before.jsonl", before_run())
    b = write_run(tmp_path / "after.jsonl", after_run())
    assert cli.main(["report", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    lines = {line.split("  ")[0]: line for line in out.splitlines()}
    assert "x2.14" in lines["batches/s"]  # 6.00 vs 2.80 batches/s
    assert "44%" in lines["data-wait share"] and "5%" in lines["data-wait share"]
    assert "-39 pts" in lines["data-wait share"]
    assert text._points(0.75, 0.7499) == text._points(0.75, 0.7501) == "same"  # was "-0 pts"
    assert text._points(0.25, 0.2549) == "same" and text._points(0.25, 0.256) == "+1 pts"
    assert "60%" in out and "+60 pts" in out  # compute-bound 40% -> 100%
    assert f"A top fix: {PACK_FIX}" in out and "B top fix: speed up the step" in out
    assert (tmp_path / "before-vs-after.png").read_bytes()[:4] == b"\x89PNG"

    assert cli.main(["report", str(a), str(b), "--json", "--no-png"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in data["runs"]] == [str(a), str(b)]
    assert data["runs"][1]["verdict_shares"] == {"compute-bound": 1.0}
    assert data["png"] is None


def appended_runs(tmp_path: Path) -> Path:
    """One logs folder used by two container starts, as README step 2 run twice leaves it:
    the run before the fix, then the run after it, appended to the same diskinfo.jsonl."""
    before, after = before_run(), after_run()
    for rec in before:
        rec.started = before[0].ts - 10
    for rec in after:
        rec.started = after[0].ts - 10
    (tmp_path / "logs").mkdir()
    return write_run(tmp_path / "logs" / "diskinfo.jsonl", before + after)


def test_a_file_two_runs_appended_to_reports_the_last_and_says_how_to_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report took the whole file as one run: both runs' verdicts and throughput mixed,
    the hour between them inside its duration."""
    run = appended_runs(tmp_path)
    assert cli.main(["report", str(run), "--no-png"]) == 0
    out = capsys.readouterr().out
    note, summary = out.split("\n", 1)
    assert note.startswith(f"{run} holds 2 runs (1: 2027-01-15 08:00:00 UTC, 0m 25s; 2:")
    assert "this report: run 2 (the last)" in note and "--run prev,last" in note
    assert summary.startswith(f"run: {run} (run 2)  ")
    assert "100.0%  compute-bound" in summary and SMALL not in summary
    assert "6.00 batches/s" in summary and "(0m 25s, 5 intervals)" in summary

    assert cli.main(["report", str(run), "--run", "prev,last"]) == 0
    out = capsys.readouterr().out
    lines = {line.split("  ")[0]: line for line in out.splitlines()}
    assert "A: run 1" in out and "B: run 2" in out and "x2.14" in lines["batches/s"]
    assert "this report: runs 1 and 2 side by side" in out
    png = run.with_name("diskinfo-run1-vs-run2.png")
    assert f"timeline: {png}" in out and png.read_bytes()[:4] == b"\x89PNG"

    assert cli.main(["report", str(run), "--run", "1", "--json", "--no-png"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["picked"] == [{"file": str(run), "run": 1, "of": 2, "rotated": []}]
    assert data["runs"][0]["verdict_shares"] == {SMALL: 0.6, "compute-bound": 0.4}

    assert cli.main(["report", str(run), "--run", "all", "--no-png"]) == 0
    assert "(2 runs as one)" in capsys.readouterr().out


def test_run_picks_that_cannot_be_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = appended_runs(tmp_path)
    single = write_run(tmp_path / "one.jsonl", before_run())

    def err(*argv: str) -> str:
        return one_line_error(["report", *argv, "--no-png"], capsys).rstrip("\n")

    assert err(str(run), "--run", "3") == f"diskinfo: error: {run} holds 2 runs: no run 3"
    assert err(str(run), "--run", "0").endswith("no run 0")
    assert err(str(run), "--run", "2,2").endswith("the same run twice; name two runs to compare")
    assert err(str(run), "--run", "1,2,3").endswith("not 3")
    assert err(str(run), "--run", "first").endswith("'first'")
    assert err(str(single), "--run", "prev").endswith(
        "holds 1 run: there is no run before the last"
    )
    assert "picks runs of one file" in err(str(run), str(single), "--run", "1")


def test_a_run_the_jsonl_rotated_through_is_reported_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The JSONL rotates at 50 MiB (about 19 hours at the image's 5 s): a run of days left
    only its last hours in diskinfo.jsonl, and report covered those as if they were the run.
    An earlier run in the oldest file is not the long run's and stays out of it."""
    from diskinfo.sinks.jsonl import JsonlSink

    early = before_run(t0=1_700_000_000.0)
    for rec in early:
        rec.started = early[0].ts - 10
    long = [
        interval(1_800_000_000.0 + 5 * i, 5.0, "compute-bound", ["speed up the step"],
                 r_s=400, rmb_s=200.0, wait=0.25, step=4.75, batches=30, gpu=95.0)
        for i in range(1, 61)
    ]  # fmt: skip
    for rec in long:
        rec.started = 1_800_000_000.0
    last = after_run(t0=1_800_100_000.0)
    for rec in last:
        rec.started = 1_800_099_990.0
    # the monitor's own rotation, at about 23 records a file whatever fields a record gains:
    # the current file holds the long run's end and the last run
    line = len(orjson.dumps(long[0].to_dict())) + 1
    sink = JsonlSink(str(tmp_path), max_bytes=int(line * 23.5), backups=5)
    for rec in early + long + last:
        sink.write(rec)
    sink.close()
    path = tmp_path / "diskinfo.jsonl"
    older = sorted(p.name for p in tmp_path.glob("diskinfo.jsonl.*"))
    assert len(older) >= 2, older  # the long run spans three files or more
    assert cli.main(["report", str(path), "--run", "1", "--no-png"]) == 0
    out = capsys.readouterr().out
    assert f"{path}: its first run began before the file" in out
    assert f"run: {path} (run 1)  2027-01-15 08:00:00 -> 2027-01-15 08:05:00 UTC" in out
    assert "(5m 00s, 60 intervals)" in out and "100.0%  compute-bound" in out
    # the last run is the default, whole and alone
    assert cli.main(["report", str(path), "--no-png", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["picked"][0]["run"] == data["picked"][0]["of"] == 2
    assert len(data["picked"][0]["rotated"]) >= 1
    assert data["runs"][0]["intervals"] == len(last)


def test_a_rotated_file_ending_in_another_run_is_not_read(tmp_path: Path) -> None:
    from diskinfo.report import load_with_rotated

    a, b = before_run(), after_run()
    for rec in a:
        rec.started = 1.0
    for rec in b:
        rec.started = 2.0
    write_run(tmp_path / "diskinfo.jsonl.1", a)
    write_run(tmp_path / "diskinfo.jsonl", b)
    records, read = load_with_rotated(tmp_path / "diskinfo.jsonl")
    assert (len(records), read) == (len(b), [])


def test_records_from_before_the_run_field_are_one_run(tmp_path: Path) -> None:
    from diskinfo.report import split_runs

    old = before_run() + after_run()  # started = 0 in every record
    assert [len(r) for r in split_runs(old)] == [len(old)]


def test_every_record_of_one_watch_carries_its_start(tmp_path: Path) -> None:
    for _ in range(2):
        assert cli.main(["watch", str(tmp_path), "--count", "2", "--interval", "0.05",
                         "--log-dir", str(tmp_path / "logs"), "--echo", "never"]) == 0  # fmt: skip
    from diskinfo.report import split_runs

    runs = split_runs(load_run(tmp_path / "logs" / "diskinfo.jsonl"))
    assert [len(r) for r in runs] == [2, 2]
    assert all(rec.started and rec.started < rec.ts for r in runs for rec in r)


def test_a_line_being_written_is_skipped(tmp_path: Path) -> None:
    run = write_run(tmp_path / "live.jsonl", before_run())
    with run.open("a") as fh:
        fh.write('{"schema": "diskinfo.interval/1", "ts": 18')  # monitor mid-write
    assert len(load_run(run)) == 4


def test_a_run_damaged_by_a_crash_still_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Power loss leaves NUL blocks or a cut line where the restarted monitor appends: the
    hours of good records around them still make a report, and the skipped lines are said."""
    lines = write_run(tmp_path / "good.jsonl", before_run()).read_text().splitlines()
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(
        lines[0] + "\n" + "\0" * 700 + "\n" + lines[1][:40] + "\n"  # NULs, then a cut line
        + "\0" * 300 + lines[2] + "\n" + lines[3] + "\n"  # the restart appended after NULs
    )  # fmt: skip
    assert cli.main(["report", str(damaged), "--no-png"]) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        f"diskinfo: warning: {damaged}: skipped 2 damaged lines (not JSON: lines 2, 3), as a "
        "crash or power loss leaves them; 3 records read"
    )
    assert "3 intervals)" in captured.out
    seen: list[str] = []
    assert len(load_run(damaged, warn=seen.append)) == 3 and len(seen) == 1
    assert load_run(tmp_path / "good.jsonl", warn=seen.append) and len(seen) == 1  # no damage


def test_bad_runs_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write_run(tmp_path / "good.jsonl", before_run())
    assert "cannot read" in one_line_error(["report", str(tmp_path / "missing.jsonl")], capsys)
    (tmp_path / "empty.jsonl").write_text("\n\n")
    assert "no interval records" in one_line_error(
        ["report", str(tmp_path / "empty.jsonl")], capsys
    )
    lines = good.read_text().splitlines()
    (tmp_path / "notes.jsonl").write_text("{not json\nnor this\n")  # not a run at all
    assert "notes.jsonl line 1: not JSON" in one_line_error(
        ["report", str(tmp_path / "notes.jsonl")], capsys
    )
    (tmp_path / "other.jsonl").write_text('{"hello": 1}\n')
    assert "line 1: not a diskinfo interval record" in one_line_error(
        ["report", str(tmp_path / "other.jsonl")], capsys
    )
    broken = json.loads(lines[0]) | {"devices": 7}
    (tmp_path / "broken.jsonl").write_text(json.dumps(broken) + "\n")
    assert "malformed interval record" in one_line_error(
        ["report", str(tmp_path / "broken.jsonl")], capsys
    )
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    assert "not text" in one_line_error(["report", str(tmp_path / "bin.jsonl")], capsys)
    assert "one run to summarise or two" in one_line_error(
        ["report", str(good), str(good), str(good)], capsys
    )
    assert "cannot write" in one_line_error(
        ["report", str(good), "--png", str(tmp_path / "no" / "dir.png")], capsys
    )


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=40),
            st.builds(json.dumps, st.dictionaries(st.text(max_size=8), st.integers(), max_size=4)),
            st.builds(
                lambda ts, e, dev: json.dumps(
                    {"schema": "diskinfo.interval/1", "ts": ts, "elapsed_s": e, "devices": dev}
                ),
                st.one_of(st.floats(), st.text(max_size=5), st.just("17"), st.none()),
                st.one_of(st.floats(0, 10), st.none()),
                st.one_of(
                    st.just([]),
                    st.just([{"device": "vda"}]),
                    st.builds(
                        lambda v: [{"device": "vda", "paths": ["/d"], "rmb_s": v}],
                        st.one_of(st.text(max_size=3), st.floats(), st.booleans(), st.none()),
                    ),
                    st.integers(),
                    st.none(),
                ),
            ),
        ),
        max_size=6,
    )
)
def test_fuzzed_jsonl_is_a_summary_or_a_one_line_error(tmp_path: Path, lines: list[str]) -> None:
    """Whatever a JSONL holds, `report` gives a summary or a UserError, never a traceback."""
    path = tmp_path / "fuzz.jsonl"
    path.write_text("\n".join(line.replace("\n", " ") for line in lines) + "\n")
    try:
        records = load_run(path)
    except UserError as exc:
        assert "\n" not in str(exc)
        return
    summary = summarise(records, "fuzz")
    assert summary.intervals == len(records)


def test_without_matplotlib_the_summary_still_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image once printed no summary at all when the PNG could not be drawn."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    run = write_run(tmp_path / "before.jsonl", before_run())
    assert cli.main(["report", str(run)]) == 0
    captured = capsys.readouterr()
    assert "top fix: " in captured.out and "timeline:" not in captured.out
    assert "no timeline PNG: the PNG needs matplotlib" in captured.err
    assert not (tmp_path / "before.png").exists()
    # a PNG asked for by name: the summary, then a one-line error
    assert cli.main(["report", str(run), "--png", str(tmp_path / "x.png")]) == 2
    captured = capsys.readouterr()
    assert "top fix: " in captured.out
    assert captured.err.count("\n") == 1 and "needs matplotlib" in captured.err


def test_the_report_s_disk_is_the_verdict_s_device() -> None:
    """A dm device over a disk that also carries another filesystem's traffic: the verdict
    judges the dm device (the top device of the watched path); so does the report."""
    from diskinfo.analyse.signals import busiest_device
    from diskinfo.analyse.verdict import decide

    rec = IntervalRecord(
        ts=1_800_000_005.0,
        elapsed_s=5.0,
        host="test",
        devices=[
            DeviceFigures("dm-0", paths=["/data"], r_s=400, rmb_s=50.0, util=90.0),
            DeviceFigures("sda", paths=["/data"], r_s=900, rmb_s=200.0, util=60.0),
        ],
    )
    disk = busiest_device(rec)
    assert disk is not None and disk.device == "dm-0"
    assert any(e.startswith("dm-0:") for e in decide(rec, {}).evidence)
    s = summarise([rec])
    assert s.disk_read_mb_s == 50.0 and s.disk_r_s == 400.0 and s.disk_util == 90.0


def test_the_verdict_strip_draws_one_span_per_steady_stretch() -> None:
    """A patch per interval made the PNG of a 19-hour run (13,800 intervals) take 12 s."""
    from diskinfo.report.plot import spans

    t0 = [0.0, 5.0, 10.0, 15.0, 20.0, 60.0, 65.0]
    t1 = [5.0, 10.0, 15.0, 20.0, 25.0, 65.0, 70.0]
    verdicts = ["idle", "idle", "compute-bound", "compute-bound", "compute-bound", "idle", "idle"]
    # a change of verdict and a gap (the monitor down, or two runs) each end a span
    assert spans(t0, t1, verdicts) == [
        (0.0, 10.0, "idle"), (10.0, 25.0, "compute-bound"), (60.0, 70.0, "idle")
    ]  # fmt: skip
    many = spans([5.0 * i for i in range(13_800)], [5.0 * i + 5 for i in range(13_800)],
                 ["compute-bound"] * 13_800)  # fmt: skip
    assert many == [(0.0, 69_000.0, "compute-bound")]


def test_a_fifo_in_place_of_the_jsonl_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """A FIFO is never waited on (opened non-blocking, refused as not a regular file): the
    command someone typed returns, with one line."""
    fifo = tmp_path / "diskinfo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"cannot read .*diskinfo\.jsonl: not a regular file"):
        load_run(fifo)
