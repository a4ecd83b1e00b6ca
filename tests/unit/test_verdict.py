"""analyse/verdict.py: one verdict per interval, from the figures the collectors filled, with
evidence and fixes (and the Diagnoser's per-interval pieces it needs)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diskinfo.analyse import signals as sg
from diskinfo.analyse.baseline import DeviceBaseline
from diskinfo.analyse.diagnoser import Diagnoser
from diskinfo.analyse.fixes import SHM_FIX
from diskinfo.analyse.verdict import decide, io_share_of_loading
from diskinfo.record import (
    DeviceFigures,
    GpuFigures,
    LoaderFigures,
    ProcessIO,
    Verdict,
    VerdictName,
)
from tests.helpers.records import disk, host, loader
from tests.helpers.records import training_record as rec

BASE = {"nvme0n1": DeviceBaseline("nvme0n1", seq_read_mb_s=1000.0, rand_read_iops=20000.0)}


def test_small_file_random_reads():
    v = decide(
        rec(
            loader=loader(0.6), devices=[disk(r_s=900, rmb_s=14, rareq_sz=16, r_await=0.9, util=88)]
        ),
        BASE,
    )
    assert v.verdict == VerdictName.INPUT_SMALL_FILES and v.severity == "high"
    assert v.input_share == pytest.approx(0.6)
    assert "data-wait 60% of step time" in v.evidence[0]
    assert any(f.startswith("num_workers 0 -> 2: ") for f in v.fixes)
    assert any("diskinfo pack" in f for f in v.fixes)
    assert v.workers_target == 2  # the N its words name, carried for the run's summary


def test_disk_at_its_measured_bandwidth():
    v = decide(
        rec(
            loader=loader(0.5, workers=8),
            devices=[disk(r_s=900, rmb_s=900, rareq_sz=1024, aqu_sz=8, util=99)],
        ),
        BASE,
    )
    assert v.verdict == VerdictName.INPUT_DISK
    assert "90% of the measured bandwidth" in v.summary
    assert any("faster local storage" in f for f in v.fixes)


def test_cpu_saturated_with_a_quiet_disk():
    # every core busy: more workers would share the same cores; no GPU: no GPU fixes
    v = decide(
        rec(
            loader=loader(0.4, workers=2),
            cpu=host(busy=97),
            procs=[ProcessIO(pid=2, name="python", role="worker", cpu_percent=99)],
        ),
        BASE,
    )
    assert v.verdict == VerdictName.INPUT_CPU and v.cause == "cpu-saturated"
    assert v.fixes[0].startswith("make per-sample work cheaper: cache preprocessed samples")
    assert not any("num_workers 2 ->" in f or "pin_memory" in f or "GPU" in f for f in v.fixes)
    assert "diskinfo tune MODULE:FACTORY" in v.fixes[-1]


@pytest.mark.parametrize(
    ("start_share", "persistent", "first"),
    [
        (0.6, False, "persistent_workers=True: the DataLoader started its 2 workers 8 times"),
        (0.1, False, "make per-sample work cheaper"),  # restarts are not where it waits
        (0.6, True, "start each epoch cheaply"),  # persistent: the start is the dataset's
        (0.3, True, "make per-sample work cheaper"),
    ],
)
def test_workers_restarted_every_short_epoch_put_persistent_workers_first(
    start_share: float, persistent: bool, first: str
) -> None:
    """Short epochs without persistent_workers fork the workers again each time (the README's
    train.py: an epoch every 0.6 s); when that is where the loop waits, say so first."""
    figures = loader(0.5, workers=2)
    figures.persistent_workers = persistent
    figures.epochs = 8
    figures.start_wait_s = figures.wait_s * start_share
    v = decide(
        rec(
            loader=figures,
            cpu=host(busy=97),
            procs=[ProcessIO(pid=2, name="python", role="main", cpu_percent=114)],
        ),
        BASE,
    )
    assert v.verdict == VerdictName.INPUT_CPU and v.fixes[0].startswith(first), v.fixes
    assert sum("persistent_workers=True" in f for f in v.fixes) <= 1  # said once at most
    if first.startswith("persistent"):
        assert f"{start_share:.0%} of the data-wait" in v.fixes[0]
    assert (v.cause == "epoch-start") == (start_share >= 0.5)


def test_the_wait_at_every_epoch_start_is_the_cause_with_its_share_of_the_loop() -> None:
    """Most of the data-wait at each epoch's first batch: the epoch's start is what to fix,
    whatever the disk or the CPU do in between; its share of the loop's time is said."""
    figures = loader(0.5, workers=2)  # data-wait half the loop
    figures.epochs, figures.start_wait_s = 5, figures.wait_s * 0.8
    v = decide(rec(loader=figures, devices=[disk(util=99, r_await=40)]), BASE)
    assert v.verdict == VerdictName.INPUT_CPU and v.cause == "epoch-start", v
    assert "over 5 epoch starts, 40% of the loop's time (80% of its data-wait)" in v.summary + str(
        v.evidence
    )
    assert v.fixes[0].startswith("persistent_workers=True: the DataLoader started its 2 workers")
    assert v.fixes[1].startswith("start each epoch cheaply")


def test_too_few_workers_name_the_change_with_this_machines_cores():
    workers = [ProcessIO(pid=p, name="python", role="worker", cpu_percent=99) for p in (2, 3)]
    v = decide(rec(loader=loader(0.5, workers=2), cpu=host(busy=14), procs=workers), BASE)
    assert v.verdict == VerdictName.INPUT_CPU and v.cause == "few-workers"
    assert v.fixes[0] == "num_workers 2 -> 4: 2.0 of 16 cores are busy loading"
    gpu = GpuFigures(index=0, util_mean=40, util_max=90, idle_fraction=0.5, samples=50)
    with_gpu = decide(
        rec(loader=loader(0.5, workers=2), cpu=host(busy=14), procs=workers, gpus=[gpu]), BASE
    )
    assert any(f.startswith("pin_memory=True") for f in with_gpu.fixes)


def test_without_workers_the_fix_does_not_call_the_training_process_all_loading():
    """num_workers=0: the main process's CPU is its step's as well. '1.4 of 2 cores are busy
    loading' said all of it was loading, and on a 2-core walk the advised workers were slower."""
    main = [ProcessIO(pid=2, name="python", role="main", cpu_percent=145)]
    v = decide(rec(loader=loader(0.44), cpu=host(busy=40), procs=main), BASE)
    assert v.verdict == VerdictName.INPUT_CPU
    assert v.fixes[0] == (
        "num_workers 0 -> 2: loading and the step take turns in the training process "
        "(1.4 of 16 cores busy)"
    )


def test_a_step_that_fills_the_cores_gets_no_promise_of_more_workers():
    """num_workers=0 on 2 cores, the training process at 1.5 cores with half its time in
    data-wait: loading takes one core of that while the step waits, so the step runs at
    (1.5 - 0.5) / 0.5 = 2.0 cores. Workers would take their CPU from the step (a user's walk:
    num_workers 0 -> 2 cut data-wait from 50% to 3% and samples/s went x1.02), so the fix says
    so instead of promising a gain; with the step at 1 core of 2 it still proposes workers."""
    two = replace(host(busy=75), cpu_count=2)

    def judged(main_pct: float) -> Verdict:
        main = [ProcessIO(pid=2, name="python", role="main", cpu_percent=main_pct)]
        return decide(rec(loader=loader(0.5), cpu=two, procs=main), BASE)

    assert "more workers will not help: the step uses 2.0 of 2 cores" in judged(150).fixes
    assert not any(f.startswith("num_workers") for f in judged(150).fixes)
    assert judged(150).workers_target is None  # no num_workers to reach
    assert any(f.startswith("num_workers 0 -> 2") for f in judged(100).fixes)
    assert judged(100).workers_target == 2


def test_ddp_ranks_share_the_cores_the_workers_fix_counts():
    """Each rank of a DDP run has its own DataLoader workers: 4 ranks x 2 workers are 8 on
    16 cores (room for 4 each), 8 ranks x 2 are 16 (none). Found with Lightning, 2 ranks x 1
    worker on 2 cores: the fix said num_workers 1 -> 2, 4 workers for 2 cores."""

    def run(ranks: int):
        workers = [
            ProcessIO(pid=p, name="pt_data_worker", role="worker", cpu_percent=99)
            for p in range(2, 2 + 2 * ranks)
        ]
        return decide(
            rec(loader=loader(0.5, workers=2, ranks=ranks), cpu=host(busy=60), procs=workers),
            BASE,
        )

    four = run(4)
    assert four.verdict == VerdictName.INPUT_CPU and four.cause == "few-workers"
    assert four.fixes[0] == (
        "num_workers 2 -> 4 in each of the 4 training processes: 7.9 of 16 cores are busy loading"
    )
    eight = run(8)
    assert eight.verdict == VerdictName.INPUT_CPU and eight.cause == "cpu-saturated"
    assert "16 DataLoader workers" in eight.summary
    assert not any(f.startswith("num_workers") for f in eight.fixes), eight.fixes


def test_nvme_util_at_100_far_below_bandwidth_is_not_blamed_on_the_disk():
    # %util saturates with one request always in flight; the device could do far more
    v = decide(
        rec(
            loader=loader(0.5, workers=4),
            cpu=host(busy=96),
            devices=[disk(r_s=800, rmb_s=200, rareq_sz=256, r_await=0.3, aqu_sz=1, util=100)],
        ),
        BASE,
    )
    assert v.verdict == VerdictName.INPUT_CPU


def test_compute_bound():
    gpu = GpuFigures(index=0, util_mean=97, util_min=90, util_max=100, samples=50)
    v = decide(rec(loader=loader(0.02, workers=8), gpus=[gpu]), BASE)
    assert v.verdict == VerdictName.COMPUTE_BOUND and v.severity == "none"
    assert "autocast" in v.fixes[0]


@pytest.mark.parametrize(
    ("idle", "pulsing", "expected"),
    [(0.0, 0.0, VerdictName.COMPUTE_BOUND), (0.4, 0.8, VerdictName.INPUT_CPU)],
)
def test_moderate_share_depends_on_the_gpu(idle, pulsing, expected):
    gpu = GpuFigures(index=0, util_mean=60, idle_fraction=idle, pulsing=pulsing, samples=50)
    v = decide(rec(loader=loader(0.10, workers=4), gpus=[gpu]), BASE)
    assert v.verdict == expected and v.severity == "moderate"


def test_xprof_split():
    assert [sg.severity_of(x) for x in (0.0, 0.049, 0.05, 0.199, 0.2, 1.0)] == [
        "none",
        "none",
        "moderate",
        "moderate",
        "high",
        "high",
    ]


def test_idle_when_the_loop_runs_no_step():
    idle_loader = LoaderFigures(processes=0)
    gpu = GpuFigures(index=0, util_mean=0, idle_fraction=1.0, samples=50)
    assert decide(rec(loader=idle_loader, gpus=[gpu]), BASE).verdict == VerdictName.IDLE
    assert decide(rec(loader=idle_loader), BASE).verdict == VerdictName.IDLE


def test_no_loop_figures_gpu_pulsing_and_disk_busy_is_input_bound_inferred():
    gpu = GpuFigures(index=0, util_mean=45, idle_fraction=0.5, pulsing=0.9, bursts=5, samples=50)
    v = decide(rec(gpus=[gpu], devices=[disk(r_s=3000, rmb_s=950, rareq_sz=320, util=99)]), BASE)
    assert v.verdict == VerdictName.INPUT_DISK and v.input_share is None
    assert "inferred from the GPU" in v.summary


def test_no_loop_and_no_gpu():
    busy = decide(rec(devices=[disk(r_s=3000, rmb_s=950, util=99)]), BASE)
    quiet = decide(rec(cpu=host(busy=3)), BASE)
    # no training command: never the "wrap its DataLoader" hint
    assert busy.verdict == VerdictName.UNKNOWN and "diskinfo.torch.watch" not in busy.summary
    assert quiet.verdict == VerdictName.IDLE and quiet.cause == "no-training"


def test_worker_deaths_with_small_shm_name_the_fix_first():
    v = decide(rec(loader=loader(0.9, workers=4, errors=2), cpu=host(shm=64)), BASE)
    assert v.fixes[0] == SHM_FIX and "--shm-size=16g" in v.summary
    assert "--ipc=host" in v.fixes[0] and "64 MB" in v.evidence[0]
    big = decide(rec(loader=loader(0.9, workers=4, errors=2), cpu=host(shm=16384)), BASE)
    assert SHM_FIX not in big.fixes


def test_preload_first_when_the_dataset_fits_in_ram():
    fits = rec(
        loader=loader(0.6),
        cpu=host(dataset=2000, available=20000),
        devices=[disk(r_s=900, rmb_s=14, rareq_sz=16, util=88)],
    )
    v = decide(fits, BASE)
    assert v.fixes[0].startswith(
        "the dataset, 1.95 GiB, fits in the 19.5 GiB of available memory (page cache now 1000 MiB)"
    )
    big = rec(
        loader=loader(0.6),
        cpu=host(dataset=200000, available=20000),
        devices=[disk(r_s=900, rmb_s=14, rareq_sz=16, util=88)],
    )
    assert "fits in" not in decide(big, BASE).fixes[0]


def test_without_baseline_small_files_use_the_absolute_floor():
    v = decide(rec(loader=loader(0.6), devices=[disk(r_s=900, rmb_s=14, rareq_sz=16, util=88)]), {})
    assert v.verdict == VerdictName.INPUT_SMALL_FILES


def test_the_interval_the_loop_starts_in_is_not_judged_on_start_up_reads():
    """The loop ran 1 s of a 5 s interval whose reads were torch's import: starting, then the
    next interval (the loop ran through it) is judged; a new training command starts over."""
    diag = Diagnoser(BASE)
    busy = [disk(r_s=900, rmb_s=14, rareq_sz=16, util=88)]
    first = diag(rec(loader=loader(0.6, elapsed=1.0), devices=busy))
    assert (first.verdict, first.cause, first.fixes) == ("unknown", "starting", [])
    assert "ran 20% of it" in first.summary
    assert diag(rec(loader=loader(0.6), devices=busy)).verdict == VerdictName.INPUT_SMALL_FILES
    short = rec(loader=loader(0.6, elapsed=1.0), devices=busy)  # a later short interval counts
    assert diag(short).interval_verdict == VerdictName.INPUT_SMALL_FILES
    ended = rec(devices=busy)
    ended.procs = []
    diag(ended)
    assert diag(rec(loader=loader(0.6, elapsed=1.0), devices=busy)).interval_cause == "starting"
    later = Diagnoser(BASE)  # the loop ran half of its first interval (seen in a real start)
    assert later(rec(loader=loader(0.6, elapsed=2.6), devices=busy)).interval_cause == "starting"
    # the next interval is judged even when the wrapper's publishing leaves part of it out
    assert (
        later(rec(loader=loader(0.6, elapsed=2.6), devices=busy)).verdict
        == VerdictName.INPUT_SMALL_FILES
    )
    dying = Diagnoser(BASE)(rec(loader=loader(0.6, errors=1, elapsed=1.0), devices=busy))
    assert dying.interval_cause != "starting"  # worker deaths are judged at once


def test_sustained_await_warns_after_three_minutes_and_resets():
    diag = Diagnoser(BASE)
    slow = rec(loader=loader(0.5), devices=[disk(r_s=100, rmb_s=50, r_await=80, util=60)])
    slow.elapsed_s = 60.0
    results = [diag(slow) for _ in range(3)]
    assert [bool(r.warnings) for r in results] == [False, False, True]
    assert "await 80 ms above 50 ms for 3.0 min" in results[2].warnings[0]
    ok = rec(loader=loader(0.5), devices=[disk(r_s=100, rmb_s=50, r_await=2, util=60)])
    ok.elapsed_s = 60.0
    assert not diag(ok).warnings
    assert not diag(slow).warnings  # the clock starts again


def test_sustained_util_and_low_bandwidth_while_input_bound():
    diag = Diagnoser(lambda: BASE)
    r = rec(
        loader=loader(0.6, elapsed=30.0), devices=[disk(r_s=900, rmb_s=14, rareq_sz=16, util=99)]
    )
    r.elapsed_s = 30.0
    first, second = diag(r), diag(r)
    assert not first.warnings
    assert any("%util above 95% for 60 s" in w for w in second.warnings)
    assert any("under 30% of its measured 1000 MB/s" in w for w in second.warnings)


finite = st.floats(0, 1e6, allow_nan=False)


@settings(max_examples=200)
@given(
    share=st.floats(0, 1),
    util=st.floats(0, 100),
    r_s=finite,
    rmb=finite,
    rq=finite,
    aw=finite,
    busy=st.floats(0, 100),
    idle=st.floats(0, 1),
    has_gpu=st.booleans(),
    has_loader=st.booleans(),
)
def test_decide_always_gives_one_known_verdict(
    share, util, r_s, rmb, rq, aw, busy, idle, has_gpu, has_loader
):
    gpus = (
        [GpuFigures(index=0, util_mean=100 * (1 - idle), idle_fraction=idle)] if has_gpu else None
    )
    r = rec(
        loader=loader(share) if has_loader else None,
        gpus=gpus,
        cpu=host(busy=busy),
        devices=[disk(r_s=r_s, rmb_s=rmb, rareq_sz=rq, r_await=aw, util=util)],
    )
    v = decide(r, BASE)
    assert v.verdict in {
        VerdictName.INPUT_DISK,
        VerdictName.INPUT_CPU,
        VerdictName.INPUT_SMALL_FILES,
        VerdictName.COMPUTE_BOUND,
        VerdictName.IDLE,
        VerdictName.UNKNOWN,
    }
    assert v.summary and v.evidence
    if v.verdict.startswith("input-bound"):
        assert v.fixes


def test_the_top_device_speaks_for_the_path_not_the_disk_beneath_it():
    # a loop device (the dataset) on the root disk, which other work keeps busy
    top = DeviceFigures(device="loop0", paths=["/data"], r_s=1100, rmb_s=13, rareq_sz=12, util=60)
    leaf = DeviceFigures(device="vda", paths=["/data"], r_s=2000, rmb_s=260, rareq_sz=128, util=99)
    v = decide(rec(loader=loader(0.5), devices=[top, leaf]), {})
    assert v.verdict == VerdictName.INPUT_SMALL_FILES
    assert any(e.startswith("loop0:") for e in v.evidence)
    assert not any(e.startswith("vda:") for e in v.evidence)


def test_a_single_reader_blocked_on_reads_is_disk_side_even_at_full_cpu():
    # num_workers=0: the loop waits 45% of the time and has a read in flight 23% of the time
    r = rec(
        loader=loader(0.45),
        cpu=host(busy=95),
        devices=[disk(r_s=1800, rmb_s=27, rareq_sz=16, r_await=0.13, aqu_sz=0.23, util=21)],
        procs=[ProcessIO(pid=1, name="python", role="main", cpu_percent=97)],
    )
    s = sg.signals(r, BASE)
    assert io_share_of_loading(s) == pytest.approx(0.23 / 0.45)
    v = decide(r, BASE)
    assert v.verdict == VerdictName.INPUT_SMALL_FILES
    assert "read in flight 51% of its loading time" in v.summary
    assert not v.summary.startswith("input-bound")  # the log line prefixes the verdict itself


def test_many_workers_each_rarely_blocked_with_a_saturated_cpu_is_cpu():
    r = rec(
        loader=loader(0.45, workers=8),
        cpu=host(busy=95),
        devices=[disk(r_s=1800, rmb_s=27, rareq_sz=16, r_await=0.5, aqu_sz=0.9, util=60)],
    )
    assert io_share_of_loading(sg.signals(r, BASE)) == pytest.approx(0.9 / 8)
    assert decide(r, BASE).verdict == VerdictName.INPUT_CPU


def test_training_process_running_without_loop_figures_is_named():
    r = rec(
        devices=[disk(r_s=3000, rmb_s=950, util=99)],
        procs=[ProcessIO(pid=7, name="python", role="main", cpu_percent=100)],
    )
    v = decide(r, BASE)  # how long it ran unknown: as if for a while
    assert v.verdict == VerdictName.UNKNOWN and v.cause == "not-wrapped"
    assert "publishes no loop figures" in v.summary
    # what to do is the fix, so `[Run]` and `diskinfo report` name it as the one to try
    assert v.fixes == [
        "wrap the DataLoader the loop iterates with diskinfo.torch.watch (with Accelerate, the "
        "one prepare returns); the monitor then measures its data-wait"
    ]
    young = decide(r, BASE, training_s=20.0)  # a wrapped loader may still be starting
    assert young.verdict == VerdictName.UNKNOWN and young.cause == "starting"
    assert "diskinfo.torch.watch" not in young.summary
