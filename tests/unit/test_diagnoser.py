"""analyse/diagnoser.py: the held verdict (Hysteresis), the wrap hint's delay, once-only notes,
the /dev/shm floor from SHM_MIN_MB, and verdicts that need the Diagnoser's memory or a
container's CPU, from records as the collectors fill them."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo import thresholds as t
from diskinfo.analyse.diagnoser import Diagnoser, Hysteresis
from diskinfo.analyse.signals import busiest_device
from diskinfo.analyse.verdict import decide
from diskinfo.record import (
    Cause,
    DeviceFigures,
    GpuFigures,
    HostFigures,
    IntervalRecord,
    ProcessIO,
    VerdictName,
)
from tests.helpers.records import SMALL_FILE_READS, judged_record, loop_figures


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
    diag = Diagnoser({}, hold=2, share_window=1)  # the cause's hold alone
    small = judged_record(loader=loop_figures(0.6), devices=SMALL_FILE_READS)
    fast = judged_record(loader=loop_figures(0.01))
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


def test_the_account_says_what_changed_and_what_each_interval_decided():
    """The facts the log's [Verdict] and [Summary] lines word, decided here (the log only
    writes them): the sequence of the JSONL test above, held small files then compute."""
    diag = Diagnoser({}, hold=2, share_window=1)  # the cause's hold alone
    small = judged_record(loader=loop_figures(0.6), devices=SMALL_FILE_READS)
    fast = judged_record(loader=loop_figures(0.01))
    out = []
    for r in (small, small, fast, small, fast, fast):
        diag(r)
        out.append(r.account)
    assert all(a is not None for a in out)
    assert [a.changed for a in out] == [True, False, False, False, False, True]
    assert out[0].was is None  # the first held verdict
    assert (out[5].was, out[5].was_cause) == (VerdictName.INPUT_SMALL_FILES, Cause.SMALL_FILES)
    # intervals 2 and 4 decided compute-bound while small files were held; 5 holds it
    assert [a.agrees for a in out] == [True, True, False, True, False, True]
    assert [a.waited_s for a in out] == pytest.approx([3.0, 3.0, 0.05, 3.0, 0.05, 0.05])
    # the run so far, for the closing line: one tally, still counting
    assert out[0].run is out[5].run and out[5].run.total_s == 30.0
    assert out[5].run.shares() == {
        VerdictName.INPUT_SMALL_FILES: pytest.approx(5 / 6),
        VerdictName.COMPUTE_BOUND: pytest.approx(1 / 6),
    }


def test_a_change_in_an_interval_whose_analysis_failed_is_said_with_the_next(monkeypatch):
    """The account compares with the verdict handed out before: the change is not lost with
    the interval that made it (the log said it one interval late, as it always did)."""
    diag = Diagnoser({}, hold=1)
    fast = judged_record(loader=loop_figures(0.01))
    idle = judged_record()
    diag(fast)
    assert fast.account.changed
    real = diag._warnings
    monkeypatch.setattr(diag, "_warnings", lambda *a: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        diag(idle)  # the held verdict changed to idle here, and nothing was handed out
    assert idle.account is not None and not idle.account.changed  # counted, nothing said
    monkeypatch.setattr(diag, "_warnings", real)
    diag(idle)
    after = idle.account
    assert after.changed and after.was == VerdictName.COMPUTE_BOUND, after
    assert after.run.shares() == {
        VerdictName.COMPUTE_BOUND: pytest.approx(1 / 3),
        "no verdict": pytest.approx(1 / 3),
        VerdictName.IDLE: pytest.approx(1 / 3),
    }


def test_the_account_is_never_written_compared_or_copied():
    """The JSONL keeps its fields: the account is the monitor's own, not the record's."""
    from diskinfo.sinks.jsonl import encode

    r = judged_record(loader=loop_figures(0.6), devices=SMALL_FILE_READS)
    r.verdict = Diagnoser({}, hold=2)(r)
    assert r.account is not None
    line = json.loads(encode(r))
    assert line == json.loads(json.dumps(r.to_dict()))
    assert set(line) == {f.name for f in dataclasses.fields(IntervalRecord)}
    back = IntervalRecord.from_dict(line)
    assert back == r and back.account is None


def test_small_files_are_named_without_a_baseline_and_the_bench_hint_is_said_once():
    diag = Diagnoser({}, hold=2)
    out = [
        diag(judged_record(loader=loop_figures(0.6, workers=2), devices=SMALL_FILE_READS))
        for _ in range(3)
    ]
    assert out[0].verdict == VerdictName.INPUT_SMALL_FILES and out[0].cause == "small-files"
    assert out[0].notes == ["no measured bandwidth for loop0: run `diskinfo bench /data`"]
    assert out[1].notes == [] and out[2].notes == []
    busy = HostFigures(cpu_busy=100, cpu_count=2, mem_available_mb=20000)
    cpu = Diagnoser({}, hold=2)(judged_record(loader=loop_figures(0.6, workers=2), cpu=busy))
    assert cpu.verdict == VerdictName.INPUT_CPU and cpu.notes == []  # the disk is not the suspect


def test_the_wrap_hint_waits_for_a_training_command_that_runs_a_while():
    diag = Diagnoser({}, hold=1)
    proc = [ProcessIO(pid=7, name="python", role="main", cpu_percent=100)]
    seen = [diag(judged_record(procs=proc)) for _ in range(14)]  # 5 s each
    starting = [v for v in seen if v.cause == "starting"]
    wrapped = [v for v in seen if v.cause == "not-wrapped"]
    assert len(starting) == 11 and len(wrapped) == 3  # 5..55 s starting, from 60 s the hint
    assert all("diskinfo.torch.watch" not in v.summary for v in starting)
    assert all(v.verdict == VerdictName.UNKNOWN for v in seen)
    # no training command at all: never the hint, idle while this container is quiet
    quiet = diag(judged_record())
    assert quiet.interval_verdict == VerdictName.IDLE and "wrap" not in quiet.summary


def test_a_loader_wrapped_but_never_iterated_is_named_not_taken_for_unwrapped():
    """Accelerate builds its own loader from one wrapped before `prepare`: the process
    published (zeros) but iterated nothing. Told so, not "wrap its DataLoader"."""
    diag = Diagnoser({}, hold=1)
    proc = [ProcessIO(pid=7, name="python", role="main", cpu_percent=100)]
    seen = [diag(judged_record(procs=proc, wrapped_not_iterated=2)) for _ in range(14)]  # 5 s each
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
    seen = [diag(judged_record(procs=proc, gpus=gpu, wrapped_not_iterated=1)) for _ in range(14)]
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
    v = decide(judged_record(loader=loop_figures(0.1976)), {})
    assert v.verdict == VerdictName.COMPUTE_BOUND
    assert "19.8% of step time" in v.summary and "20%" not in v.summary.split(";")[0]
    # the words of the evidence's own scale: 5-20% is moderately input-bound, never "only"
    assert v.summary.startswith("moderately input-bound") and "only" not in v.summary
    assert "moderately input-bound" in v.evidence[0]
    low = decide(judged_record(loader=loop_figures(0.0498)), {})
    assert "only 4.98% of step time" in low.summary, low.summary


def test_the_shm_floor_is_read_from_shm_min_mb(monkeypatch):
    def rec_with(shm: float) -> IntervalRecord:
        ld = loop_figures(0.9, workers=2)
        ld.worker_errors = 1
        return judged_record(loader=ld, cpu=HostFigures(cpu_count=4, shm_total_mb=shm))

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
    assert busiest_device(judged_record(devices=[top, leaf])).device == "loop0"
    assert busiest_device(judged_record(devices=[])) is None


def test_container_cpu_judges_and_the_host_is_context():
    # the host is saturated by someone else; this container uses 0.2 of its 4 cores
    host = HostFigures(
        cpu_busy=98, cpu_count=16, cgroup_cpu_cores=0.2, cgroup_cpu_allowed=4.0,
        cgroup_cpu_busy=5.0, cgroup_cpu_quota=4.0, cgroup_path="/docker/ab",
    )  # fmt: skip
    quiet = decide(judged_record(cpu=host), {})
    assert quiet.verdict == VerdictName.IDLE and quiet.cause == "no-training"
    waits = decide(judged_record(cpu=host, loader=loop_figures(0.5)), {})
    assert waits.verdict == VerdictName.INPUT_CPU and waits.cause == "cpu-unexplained"
    assert any(
        e.startswith("CPU: this container uses 0.2 of its 4 cores by quota (5% busy); the host 98%")
        for e in waits.evidence
    )
    workers = [ProcessIO(pid=p, name="python", role="worker", cpu_percent=50) for p in (2, 3)]
    starved = decide(
        judged_record(cpu=host, loader=loop_figures(0.5, workers=2), procs=workers), {}
    )
    # not decided by the host's load
    assert starved.verdict == VerdictName.INPUT_CPU and starved.cause == Cause.CPU_UNEXPLAINED
    assert "the host is 98% busy with other work" in starved.summary  # the host: context only
    host.cgroup_cpu_cores, host.cgroup_cpu_busy = 3.9, 97.5  # now its own quota is full
    full = decide(judged_record(cpu=host, loader=loop_figures(0.5)), {})
    assert (
        full.cause == "cpu-saturated"
        and "this container's CPU is 98% busy (4 cores)" in full.summary
    )


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
    v = decide(judged_record(cpu=host, loader=loop_figures(0.9, workers=2), procs=workers), {})
    assert (
        v.cause == "cpu-saturated" and "2 DataLoader workers want 85% of a core each" in v.summary
    )
    assert not any(f.startswith("num_workers") for f in v.fixes)


def test_a_few_reads_from_a_warm_cache_do_not_make_the_disk_the_cause():
    warm = [DeviceFigures("loop0", paths=["/data"], r_s=20, rmb_s=0.6, rareq_sz=30, aqu_sz=0.01,
                          util=1)]  # fmt: skip
    v = decide(judged_record(loader=loop_figures(0.6, workers=2), devices=warm), {})
    assert v.verdict == VerdictName.INPUT_CPU and v.cause == "cpu-unexplained"


def test_reads_near_the_cgroup_cap_still_name_the_cap():
    from diskinfo.record import CgroupIO

    dip = CgroupIO("loop0", "7:0", read_ios_s=234, read_iops=300)  # epoch boundary: 78%
    v = decide(judged_record(loader=loop_figures(0.99, workers=2), cgroup_io=[dip]), {})
    assert v.cause == "cgroup-cap" and "capped by its cgroup at 300 IOPS" in v.summary
    free = CgroupIO("loop0", "7:0", read_ios_s=150, read_iops=300)
    assert (
        decide(judged_record(loader=loop_figures(0.99, workers=2), cgroup_io=[free]), {}).cause
        != "cgroup-cap"
    )


def test_a_worker_starved_by_other_containers_names_the_contention():
    # it gets 55% of a core and waits for a CPU 40% of the time: the host's other work holds
    # the cores this container may use; more workers would queue for the same cores
    host = HostFigures(cpu_busy=100, cpu_count=2, mem_available_mb=20000, cgroup_cpu_cores=0.6,
                       cgroup_cpu_allowed=2.0, cgroup_cpu_busy=30, cgroup_path="/ctr")  # fmt: skip
    worker = ProcessIO(pid=2, name="python", role="worker", cpu_percent=55, cpu_wait_percent=40)
    v = decide(judged_record(cpu=host, loader=loop_figures(0.97, workers=1), procs=[worker]), {})
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
    assert decide(
        judged_record(cpu=host, loader=loop_figures(0.97, workers=1), procs=[worker]), {}
    ).cause == ("few-workers")


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
        return judged_record(
            cpu=host, loader=loop_figures(share, workers=2), procs=[main, *workers]
        )

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
