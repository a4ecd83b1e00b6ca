"""The held verdict, the wrap hint's delay, once-only notes, figures that never round across
their threshold, the /dev/shm floor from SHM_MIN_MB, and the verdict lines of diskinfo.log."""

from __future__ import annotations

import io
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo.analyse import thresholds as t
from diskinfo.analyse.diagnoser import Diagnoser, Hysteresis
from diskinfo.analyse.signals import busiest_device
from diskinfo.analyse.verdict import decide
from diskinfo.record import (
    Cause,
    DeviceFigures,
    GpuFigures,
    HostFigures,
    IntervalRecord,
    LoaderFigures,
    ProcessIO,
    VerdictName,
)
from diskinfo.report import summarise
from diskinfo.sinks.textlog import TextLogSink


def _loader(share: float, workers: int = 0) -> LoaderFigures:
    return LoaderFigures(
        batches=50, wait_s=4.9 * share, step_s=4.9 * (1 - share), wait_share=share,
        processes=1, num_workers=workers,
    )  # fmt: skip


def _rec(**kw) -> IntervalRecord:
    kw.setdefault("cpu", HostFigures(cpu_busy=10, cpu_count=16, mem_available_mb=20000))
    kw.setdefault("devices", [DeviceFigures("loop0", paths=["/data"])])
    return IntervalRecord(ts=1796217557.0, elapsed_s=5.0, **kw)


SMALL = [DeviceFigures("loop0", paths=["/data"], r_s=1595, rmb_s=94.2, rareq_sz=60, aqu_sz=1.1)]


def test_one_odd_interval_never_flips_the_held_verdict():
    h = Hysteresis(2)
    a, b, c = Cause.STEP, Cause.SMALL_FILES, Cause.CPU_SATURATED
    seq = [a, a, b, a, b, a, a, c, a]
    held = []
    for v in seq:
        h.push(v, 5.0)
        held.append(h.held)
    assert held == [a] * len(seq)


def test_a_real_change_is_held_within_the_window():
    h = Hysteresis(2)
    idle, x = Cause.NO_STEP, Cause.STEP
    changes = [h.push(v, 5.0) for v in [idle, idle, x, x, x]]
    assert changes == [True, False, False, True, False]
    assert h.held == x and h.held_s == 10.0


def test_leaving_unknown_is_at_once_and_returning_to_it_is_held():
    h = Hysteresis(2)
    cpu, x = Cause.CPU_SATURATED, Cause.NOT_WRAPPED
    changes = [h.push(v, 2.0) for v in [Cause.STARTING, cpu, x]]
    assert changes == [True, True, False]  # nothing to defend while unknown: the onset counts
    assert h.held == cpu
    assert h.push(x, 2.0) and h.held == x  # back to unknown: held 2 intervals
    # from one unknown cause to another: held too (a run's last interval, its command gone,
    # is not announced as a new state)
    assert not h.push(Cause.NO_FIGURES, 2.0) and h.held == x
    assert h.push(Cause.NO_FIGURES, 2.0) and h.held == Cause.NO_FIGURES


def test_alternating_evidence_keeps_the_first_verdict():
    h = Hysteresis(2)
    for v in [Cause.STEP, Cause.DISK_BUSY] * 10:
        h.push(v, 1.0)
    assert h.held == Cause.STEP


@given(st.lists(st.sampled_from([Cause.STEP, Cause.DISK_BUSY, Cause.NO_STEP]), max_size=60))
def test_the_held_verdict_changes_at_most_once_per_hold_intervals(seq):
    h = Hysteresis(2)
    flips = []
    for i, v in enumerate(seq):
        if h.push(v, 1.0) and i > 0:
            flips.append(i)
            assert seq[i] == seq[i - 1] == h.held  # a change rests on the last two decisions
    assert all(b - a >= 2 for a, b in itertools.pairwise(flips))


def test_jsonl_keeps_the_interval_decision_and_the_held_verdict():
    diag = Diagnoser({}, hold=2)
    small = _rec(loader=_loader(0.6), devices=SMALL)
    fast = _rec(loader=_loader(0.01))
    out = [diag(r) for r in (small, small, fast, small, fast, fast)]
    held = [VerdictName.INPUT_SMALL_FILES] * 5 + [VerdictName.COMPUTE_BOUND]
    assert [v.verdict for v in out] == held
    assert [v.interval_verdict for v in out][2] == VerdictName.COMPUTE_BOUND
    assert out[2].interval_cause == "step" and out[2].cause == "small-files"
    assert "1595 reads/s of 60 kB" in out[2].summary  # the held verdict's own reasons
    assert (
        out[2].evidence[0].startswith("data-wait 1% of step time (not input-bound")
    )  # the figures are this interval's
    assert out[5].held_s == 5.0 and out[4].held_s == 25.0


def test_small_files_are_named_without_a_baseline_and_the_bench_hint_is_said_once():
    diag = Diagnoser({}, hold=2)
    out = [diag(_rec(loader=_loader(0.6, workers=2), devices=SMALL)) for _ in range(3)]
    assert out[0].verdict == VerdictName.INPUT_SMALL_FILES and out[0].cause == "small-files"
    assert out[0].notes == ["no measured bandwidth for loop0: run `diskinfo bench /data`"]
    assert out[1].notes == [] and out[2].notes == []
    busy = HostFigures(cpu_busy=100, cpu_count=2, mem_available_mb=20000)
    cpu = Diagnoser({}, hold=2)(_rec(loader=_loader(0.6, workers=2), cpu=busy))
    assert cpu.verdict == VerdictName.INPUT_CPU and cpu.notes == []  # the disk is not the suspect


def test_the_wrap_hint_waits_for_a_training_command_that_runs_a_while():
    diag = Diagnoser({}, hold=1)
    proc = [ProcessIO(pid=7, name="python", role="main", cpu_percent=100)]
    seen = [diag(_rec(procs=proc)) for _ in range(14)]  # 5 s each
    starting = [v for v in seen if v.cause == "starting"]
    wrapped = [v for v in seen if v.cause == "not-wrapped"]
    assert len(starting) == 11 and len(wrapped) == 3  # 5..55 s starting, from 60 s the hint
    assert all("diskinfo.torch.watch" not in v.summary for v in starting)
    assert all(v.verdict == VerdictName.UNKNOWN for v in seen)
    # no training command at all: never the hint, idle while this container is quiet
    quiet = diag(_rec())
    assert quiet.interval_verdict == VerdictName.IDLE and "wrap" not in quiet.summary


def test_a_loader_wrapped_but_never_iterated_is_named_not_taken_for_unwrapped():
    """Accelerate builds its own loader from one wrapped before `prepare`: the process
    published (zeros) but iterated nothing. Told so, not "wrap its DataLoader"."""
    diag = Diagnoser({}, hold=1)
    proc = [ProcessIO(pid=7, name="python", role="main", cpu_percent=100)]
    seen = [diag(_rec(procs=proc, wrapped_not_iterated=2)) for _ in range(14)]  # 5 s each
    assert [v.cause for v in seen].count("starting") == 11  # the same wait as without
    hint = seen[-1]
    assert hint.verdict == VerdictName.UNKNOWN and hint.cause == "not-wrapped"
    assert hint.summary == (
        "2 training processes wrapped a loader with diskinfo.torch.watch but never iterated it "
        "after 70 s: the loop iterates another one"
    )
    assert hint.fixes == [
        "wrap the loader the loop iterates instead (with Accelerate, the one prepare returns: a "
        "loader wrapped before prepare is replaced)"
    ]
    assert all(v.notes == [] for v in seen)  # said by the verdict, not again as a note
    # with a GPU the GPU decides the verdict; the wrapped loader is a note, once
    gpu = [GpuFigures(index=0, util_mean=97, util_min=90, util_max=100, samples=50)]
    diag = Diagnoser({}, hold=1)
    seen = [diag(_rec(procs=proc, gpus=gpu, wrapped_not_iterated=1)) for _ in range(14)]
    assert seen[-1].verdict == VerdictName.COMPUTE_BOUND
    notes = [n for v in seen for n in v.notes]
    assert notes == [
        "the training process wrapped a loader with diskinfo.torch.watch but never iterated it "
        "after 60 s: the loop iterates another one: wrap the loader the loop iterates instead "
        "(with Accelerate, the one prepare returns: a loader wrapped before prepare is replaced)"
    ]
    assert [n for v in seen[:11] for n in v.notes] == []  # not before 60 s of training


@pytest.mark.parametrize(
    ("value", "threshold", "text"),
    [(19.76, 20, "19.8"), (19.996, 20, "19.996"), (19.9996, 20, "19.999"), (20.0, 20, "20"),
     (20.4, 20, "20"), (89.6, 90, "89.6"), (4.96, 5, "4.96"), (50.0, 20, "50")],
)  # fmt: skip
def test_figures_never_round_across_their_threshold(value, threshold, text):
    assert t.shown(value, threshold) == text


@given(st.floats(0, 1), st.sampled_from([0.05, 0.2, 0.3, 0.7, 1 / 3]))
def test_pct_stays_on_its_side(share, threshold):
    printed = float(t.pct(share, threshold)[:-1])
    assert (printed >= threshold * 100) == (share * 100 >= threshold * 100)


def test_a_share_just_under_the_line_is_not_printed_as_the_line():
    v = decide(_rec(loader=_loader(0.1976)), {})
    assert v.verdict == VerdictName.COMPUTE_BOUND
    assert "only 19.8% of step time" in v.summary and "20%" not in v.summary.split(";")[0]


def test_the_shm_floor_is_read_from_shm_min_mb(monkeypatch):
    def rec_with(shm: float) -> IntervalRecord:
        ld = _loader(0.9, workers=2)
        ld.worker_errors = 1
        return _rec(loader=ld, cpu=HostFigures(cpu_count=4, shm_total_mb=shm))

    monkeypatch.delenv("SHM_MIN_MB", raising=False)
    assert "--shm-size" in decide(rec_with(512), {}).fixes[0]
    monkeypatch.setenv("SHM_MIN_MB", "256")
    assert "--shm-size" not in decide(rec_with(512), {}).fixes[0]
    monkeypatch.setenv("SHM_MIN_MB", "0")  # never warn: as the start-up step and the banner
    assert "--shm-size" not in decide(rec_with(64), {}).fixes[0]
    monkeypatch.setenv("SHM_MIN_MB", "nonsense")
    assert t.shm_min_mb() == 1024


def test_busiest_device_is_the_top_device_of_the_path():
    top = DeviceFigures("loop0", paths=["/data"], util=40)
    leaf = DeviceFigures("vda", paths=["/data"], util=99)
    assert busiest_device(_rec(devices=[top, leaf])).device == "loop0"
    assert busiest_device(_rec(devices=[])) is None


def test_container_cpu_judges_and_the_host_is_context():
    # the host is saturated by someone else; this container uses 0.2 of its 4 cores
    host = HostFigures(
        cpu_busy=98, cpu_count=16, cgroup_cpu_cores=0.2, cgroup_cpu_allowed=4.0,
        cgroup_cpu_busy=5.0, cgroup_cpu_quota=4.0, cgroup_path="/docker/ab",
    )  # fmt: skip
    quiet = decide(_rec(cpu=host), {})
    assert quiet.verdict == VerdictName.IDLE and quiet.cause == "no-training"
    waits = decide(_rec(cpu=host, loader=_loader(0.5)), {})
    assert waits.verdict == VerdictName.INPUT_CPU and waits.cause == "cpu-unexplained"
    assert any(
        e.startswith("CPU: this container uses 0.2 of its 4 cores by quota (5% busy); the host 98%")
        for e in waits.evidence
    )
    workers = [ProcessIO(pid=p, name="python", role="worker", cpu_percent=50) for p in (2, 3)]
    starved = decide(_rec(cpu=host, loader=_loader(0.5, workers=2), procs=workers), {})
    # not decided by the host's load
    assert starved.verdict == VerdictName.INPUT_CPU and starved.cause == Cause.CPU_UNEXPLAINED
    assert "the host is 98% busy with other work" in starved.summary  # the host: context only
    host.cgroup_cpu_cores, host.cgroup_cpu_busy = 3.9, 97.5  # now its own quota is full
    full = decide(_rec(cpu=host, loader=_loader(0.5)), {})
    assert (
        full.cause == "cpu-saturated"
        and "this container's CPU is 98% busy (4 cores)" in full.summary
    )


def test_log_says_the_verdict_on_change_and_a_summary_and_console_keeps_only_those(tmp_path):
    echo = io.StringIO()
    sink = TextLogSink(str(tmp_path), echo=echo, console="verdicts", summary_s=20)
    diag = Diagnoser({}, hold=2)
    small = _rec(loader=_loader(0.6, workers=2), devices=SMALL)
    for i in range(8):
        r = small if i != 3 else _rec(loader=_loader(0.01))
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
        r = _rec(procs=proc, wrapped_not_iterated=1)
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
        r = _rec(procs=[ProcessIO(pid=7, name="python", role="main", cpu_percent=100)])
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
    started = _rec(procs=proc, loader=_loader(0.5))
    started.loader.wait_s = started.loader.step_s = 0.65  # 1.3 s of the 5 s interval
    ended = _rec()  # the stop's last, partial interval: the command has exited
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


def test_a_worker_born_in_the_interval_gets_its_cpu_from_its_own_start():
    from diskinfo.collectors.procs import process_rates
    from diskinfo.collectors.proctree import ProcSnapshot

    born = ProcSnapshot(12, 11, "python", 1000.5, read_bytes=0, rchar=0, cpu_s=1.5)
    old = ProcSnapshot(13, 11, "python", 900.0, read_bytes=0, rchar=0, cpu_s=50.0)
    out = process_rates({}, [born, old], {12: "worker", 13: "worker"}, 2.0, now=1001.0)
    cpu = {p.pid: p.cpu_percent for p in out}
    # the newborn: 1.5 s of CPU in its 0.5 s of life is 3 cores' worth (threads); the old one
    # was only first seen now: no figure yet
    assert cpu == {12: 300.0, 13: 0.0}


def test_workers_at_a_full_core_on_every_core_are_saturated_not_too_few():
    host = HostFigures(cpu_busy=70, cpu_count=2, mem_available_mb=20000)
    workers = [ProcessIO(pid=p, name="python", role="worker", cpu_percent=85) for p in (2, 3)]
    v = decide(_rec(cpu=host, loader=_loader(0.9, workers=2), procs=workers), {})
    assert (
        v.cause == "cpu-saturated" and "2 DataLoader workers want 85% of a core each" in v.summary
    )
    assert not any(f.startswith("num_workers") for f in v.fixes)


def test_a_few_reads_from_a_warm_cache_do_not_make_the_disk_the_cause():
    warm = [DeviceFigures("loop0", paths=["/data"], r_s=20, rmb_s=0.6, rareq_sz=30, aqu_sz=0.01,
                          util=1)]  # fmt: skip
    v = decide(_rec(loader=_loader(0.6, workers=2), devices=warm), {})
    assert v.verdict == VerdictName.INPUT_CPU and v.cause == "cpu-unexplained"


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


def test_reads_near_the_cgroup_cap_still_name_the_cap():
    from diskinfo.record import CgroupIO

    dip = CgroupIO("loop0", "7:0", read_ios_s=234, read_iops=300)  # epoch boundary: 78%
    v = decide(_rec(loader=_loader(0.99, workers=2), cgroup_io=[dip]), {})
    assert v.cause == "cgroup-cap" and "capped by its cgroup at 300 IOPS" in v.summary
    free = CgroupIO("loop0", "7:0", read_ios_s=150, read_iops=300)
    assert decide(_rec(loader=_loader(0.99, workers=2), cgroup_io=[free]), {}).cause != "cgroup-cap"


def test_a_worker_starved_by_other_containers_names_the_contention():
    # it gets 55% of a core and waits for a CPU 40% of the time: the host's other work holds
    # the cores this container may use; more workers would queue for the same cores
    host = HostFigures(cpu_busy=100, cpu_count=2, mem_available_mb=20000, cgroup_cpu_cores=0.6,
                       cgroup_cpu_allowed=2.0, cgroup_cpu_busy=30, cgroup_path="/ctr")  # fmt: skip
    worker = ProcessIO(pid=2, name="python", role="worker", cpu_percent=55, cpu_wait_percent=40)
    v = decide(_rec(cpu=host, loader=_loader(0.97, workers=1), procs=[worker]), {})
    assert v.verdict == VerdictName.INPUT_CPU and v.cause == Cause.CPU_CONTENTION
    assert v.summary.startswith(
        "the host's other work takes the CPU: the training processes waited for a core 42% of "
        "the time they wanted one (0.9 cores wanted, 0.6 got) while the host is 100% busy of 2 "
        "cores and this job uses 0.6 of its 2"
    ), v.summary
    assert v.fixes[0].startswith("give this job CPUs no other work takes: pin it")
    assert not any(f.startswith("num_workers") for f in v.fixes)
    # the same wait on a host with cores to spare is the process's own business
    host.cpu_busy = 60
    assert decide(_rec(cpu=host, loader=_loader(0.97, workers=1), procs=[worker]), {}).cause == (
        "few-workers"
    )


def test_a_neighbours_load_holds_one_verdict_through_starved_and_fed_stretches():
    """Beside a container that keeps both host cores busy, the loop alternated between starved
    stretches (20 batches/s, 8% data-wait: the main process waits for a core) and fed ones
    (50 batches/s, 40% wait), and the held verdict followed: compute-bound, input-bound: cpu,
    cpu-saturated, a change a minute. Contention names the neighbour in both, held."""
    host = HostFigures(cpu_busy=99, cpu_count=2, mem_available_mb=20000, cgroup_cpu_cores=0.9,
                       cgroup_cpu_allowed=2.0, cgroup_cpu_busy=45, cgroup_path="/ctr")  # fmt: skip

    def stretch(starved: bool, wait_pct: float) -> IntervalRecord:
        main = ProcessIO(pid=1, name="python", role="main", cpu_percent=30 if starved else 45,
                         cpu_wait_percent=wait_pct)  # fmt: skip
        workers = [ProcessIO(pid=p, name="python", role="worker", cpu_percent=25,
                             cpu_wait_percent=wait_pct) for p in (2, 3)]  # fmt: skip
        share = 0.08 if starved else 0.40
        return _rec(cpu=host, loader=_loader(share, workers=2), procs=[main, *workers])

    diag = Diagnoser({}, hold=2)
    held = []
    # 5 s intervals for 10 minutes; the wait dips to 15% in the fed stretches (between the
    # two thresholds: held), 50% in the starved ones
    for i in range(120):
        starved = (i // 6) % 2 == 0
        r = stretch(starved, 50.0 if starved else 9.0)
        r.elapsed_s = 5.0
        held.append((v := diag(r)).verdict + "|" + v.cause)
    assert set(held) == {"input-bound: cpu|cpu-contention"}, sorted(set(held))
    # and a neighbour that leaves: the wait falls under the lower threshold, the cause goes
    for _ in range(4):
        r = stretch(False, 2.0)
        v = diag(r)
    assert v.cause != "cpu-contention"
