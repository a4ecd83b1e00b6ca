"""Verdicts on a shared node: one binding limit, a share held near a threshold, the advice
held, and the start judged (docs/verdicts.md: "The binding limit", "Near a threshold",
"The start")."""

from __future__ import annotations

from diskinfo.analyse.diagnoser import Diagnoser, advice_kind
from diskinfo.analyse.start import StartState, start_state
from diskinfo.analyse.steady import ShareWindow
from diskinfo.analyse.tally import VerdictTally
from diskinfo.analyse.verdict import decide
from diskinfo.record import Cause, CgroupIO, HostFigures, LoaderFigures, ProcessIO, VerdictName
from tests.helpers.records import judged_record, loop_figures

NEIGHBOUR = HostFigures(cpu_busy=100, cpu_count=2, mem_available_mb=20000, cgroup_cpu_cores=0.3,
                        cgroup_cpu_allowed=2.0, cgroup_cpu_busy=15, cgroup_path="/ctr")  # fmt: skip
AT_CAP = CgroupIO("loop0", "7:0", read_ios_s=300, read_bytes_s=18 * 2**20, read_iops=300,
                  throttled=True, throttled_by=["read_iops"])  # fmt: skip


def waiting(wait_pct: float) -> list[ProcessIO]:
    """The training processes wanting 0.3 cores, waiting for one `wait_pct` of a core."""
    return [
        ProcessIO(pid=1, name="python", role="main", cpu_percent=10, cpu_wait_percent=wait_pct),
        ProcessIO(pid=2, name="python", role="worker", cpu_percent=10, cpu_wait_percent=wait_pct),
    ]


def test_a_read_cap_at_capacity_binds_over_the_neighbour_and_the_neighbour_is_also_said():
    """300 IOPS at the cap, 0.3 cores wanted and 30% of that waited: the cap holds the reads
    back, not the neighbour; the neighbour is a secondary finding, its fix listed after."""
    v = decide(
        judged_record(cpu=NEIGHBOUR, loader=loop_figures(0.97, workers=1), procs=waiting(5),
                      cgroup_io=[AT_CAP]), {},
    )  # fmt: skip
    assert (v.verdict, v.cause) == (VerdictName.INPUT_DISK, Cause.CGROUP_CAP), v.summary
    assert "; also: the host's other work takes the CPU" in v.summary
    assert any(e.startswith("also: the host's other work takes the CPU") for e in v.evidence)
    assert v.fixes[0].startswith("raise or remove this container's cgroup read limit")
    assert any(f.startswith("give this job CPUs no other work takes") for f in v.fixes[1:])
    # without the cap the neighbour binds, with its own fix first
    free = decide(
        judged_record(cpu=NEIGHBOUR, loader=loop_figures(0.97, workers=1), procs=waiting(5)), {}
    )
    assert free.cause == Cause.CPU_CONTENTION
    assert free.fixes[0].startswith("give this job CPUs no other work takes")


def test_the_held_verdict_does_not_alternate_between_the_cap_and_the_neighbour():
    """The neighbour's wait moves across the contention thresholds from one interval to the
    next: one headline, the cap, every interval."""
    diag = Diagnoser({}, hold=2)
    held = set()
    for i in range(40):
        r = judged_record(cpu=NEIGHBOUR, loader=loop_figures(0.97, workers=1),
                          procs=waiting(8 if i % 3 else 2), cgroup_io=[AT_CAP])  # fmt: skip
        held.add((v := diag(r)).cause)
        assert v.cause == v.interval_cause == Cause.CGROUP_CAP
    assert held == {Cause.CGROUP_CAP}


def test_a_share_hovering_across_a_line_holds_one_verdict_said_as_borderline():
    """4% and 22% in turn beside the neighbour: one held verdict, its range in the words."""
    diag = Diagnoser({}, hold=2)
    causes = []
    for i in range(30):
        share = (0.09, 0.22, 0.04, 0.05)[i % 4]
        r = judged_record(cpu=NEIGHBOUR, loader=loop_figures(share, workers=2),
                          procs=waiting(10))  # fmt: skip
        v = diag(r)
        causes.append(v.cause)
    assert len(set(causes[1:])) == 1, causes
    assert "moderately input-bound, 4-22% of step time (borderline:" in v.summary, v.summary
    assert "(4-22% per interval: borderline, held)" in v.evidence[0], v.evidence[0]


def test_the_window_goes_up_at_a_line_and_down_only_under_its_band():
    w = ShareWindow(4, band=0.4)
    levels = []
    for share in (0.10, 0.04, 0.03, 0.04, 0.03, 0.01, 0.01, 0.01, 0.25, 0.25, 0.25, 0.25, 0.10):
        k = w.push(judged_record(loader=loop_figures(share)))
        assert k is not None
        levels.append(k.severity)
    # the window's share: 10, 7, 5.7, 5.25, 3.5 (held down to 3%), 2.75 (down), 2.25, 1.5, 7,
    # 13.5, 19, 25 (high), 21.25 (held high down to 12%)
    assert levels == ["moderate"] * 5 + ["none"] * 3 + ["moderate"] * 3 + ["high"] * 2, levels
    # a loop that stops empties the window
    assert w.push(judged_record()) is None
    assert w.push(judged_record(loader=loop_figures(0.5))).severity == "high"


def test_the_advice_is_held_like_the_verdict():
    kinds = advice_kind(["num_workers 0 -> 2: 1.0 of 2 cores are busy loading", "pin_memory"])
    assert kinds == ("num_workers # -> #", "pin_memory")
    assert advice_kind(["more workers will not help: the step uses 1.9 of 2 cores"]) == (
        "more workers will not help",
    )


def test_a_moderate_share_is_worded_on_the_evidence_scale():
    v = decide(judged_record(loader=loop_figures(0.17)), {})
    assert v.verdict == VerdictName.COMPUTE_BOUND
    assert v.summary.startswith("moderately input-bound: the loop waits for data 17% of step")
    assert "only" not in v.summary


def start_record(read_mb_s: float, cpu: float, cap: bool, wait: float = 0.0, **kw):
    main = ProcessIO(pid=1, name="python", role="main", read_mb_s=read_mb_s, cpu_percent=cpu,
                     cpu_wait_percent=wait, read_bytes_total=300 << 20)  # fmt: skip
    io = [CgroupIO("vda", "253:0", read_bytes_s=read_mb_s * 2**20, read_bps=8 << 20,
                   throttled=True, throttled_by=["read_bps"])] if cap else []  # fmt: skip
    return judged_record(procs=[main], cgroup_io=io, **kw)


def test_the_start_says_what_holds_it_and_never_asks_to_wrap_while_it_reads():
    """A start reading its libraries through an 8 MB/s cap for 100 s: `starting` throughout,
    naming the cap and its fix; no "wrap the DataLoader" while the process still reads."""
    diag = Diagnoser({}, hold=2)
    for _ in range(20):  # 5 s each: 100 s
        v = diag(start_record(8.0, 2, cap=True))
        assert v.cause == Cause.STARTING, v.summary
    assert "reading 8.0 MB/s (300 MiB so far" in v.summary
    assert "at this container's cgroup read cap (8.0 MB/s on vda)" in v.summary
    assert v.fixes and v.fixes[0].startswith("raise or remove this container's cgroup read")
    assert not any("wrap" in f for f in v.fixes)
    # the reads end and nothing is published for another 60 s: the loop runs unseen
    for _ in range(13):
        v = diag(start_record(0.0, 95, cap=False))
    assert v.cause == Cause.NOT_WRAPPED


def test_start_states():
    assert start_state(start_record(8.0, 2, cap=True)) == StartState.CAPPED
    assert start_state(start_record(30.0, 5, cap=False)) == StartState.READING
    assert start_state(start_record(1.0, 97, cap=False)) == StartState.CPU
    assert start_state(start_record(0.0, 30, cap=False, wait=60)) == StartState.CPU
    assert start_state(start_record(0.0, 3, cap=False)) == StartState.WAITING


def test_the_run_says_a_long_start_and_its_cause():
    tally = VerdictTally()
    for _ in range(16):  # 80 s at the cap
        tally.add(start_record(8.0, 2, cap=True), None)
    for _ in range(3):  # 15 s importing
        tally.add(start_record(1.0, 97, cap=False), None)
    assert tally.start.words() is None  # not over yet
    loop = LoaderFigures(batches=10, wait_s=1, step_s=4, wait_share=0.2, processes=1)
    tally.add(judged_record(loader=loop, procs=[ProcessIO(pid=1, name="p", role="main")]), None)
    assert tally.start.words() == (
        "start 95 s, 80 s of it reading at the container's read cap (8.0 MB/s)"
    )
    short = VerdictTally()
    short.add(start_record(8.0, 2, cap=True), None)
    short.add(judged_record(loader=loop, procs=[ProcessIO(pid=1, name="p", role="main")]), None)
    assert short.start.words() is None


def test_the_advice_does_not_flip_within_one_held_verdict():
    """The step's CPU on the line of "more workers will not help": the held first fix stays
    one kind while the interval's own alternates."""
    host = HostFigures(cpu_busy=60, cpu_count=2, mem_available_mb=20000)
    diag = Diagnoser({}, hold=2)
    firsts, own = set(), set()
    for i in range(20):
        loop = loop_figures(0.3)
        loop.processes, loop.wait_s, loop.step_s = 2, 2 * loop.wait_s, 2 * loop.step_s  # 2 ranks
        main = ProcessIO(pid=1, name="python", role="main", cpu_percent=100 if i % 2 else 80)
        r = judged_record(cpu=host, loader=loop, procs=[main])
        v = diag(r)
        firsts.add(v.fixes[0].split(":")[0])
        own.add(decide(r, {}).fixes[0].split(":")[0])
    assert len(own) == 2, own  # the interval's own advice flips
    assert len(firsts) == 1, firsts  # the held advice does not


def test_a_disk_a_neighbour_saturates_is_said_but_never_the_loops_limit():
    """fio on the same disk at 870 MB/s while this container reads nothing from it: the loop
    computes (CPU-bound in its workers); the busy disk is a finding, not the cause."""
    from diskinfo.analyse.baseline import DeviceBaseline
    from diskinfo.record import DeviceFigures

    busy = [DeviceFigures("loop0", paths=["/data"], r_s=13000, rmb_s=870, rareq_sz=64,
                          aqu_sz=10, util=99, r_await=1)]  # fmt: skip
    quiet = CgroupIO("loop0", "7:0", read_ios_s=0, read_bytes_s=0)
    base = {"loop0": DeviceBaseline("loop0", seq_read_mb_s=468, rand_read_iops=16000)}
    workers = [ProcessIO(pid=p, name="python", role="worker", cpu_percent=99) for p in (2, 3)]
    host = HostFigures(cpu_busy=100, cpu_count=2, mem_available_mb=20000, cgroup_cpu_cores=2.0,
                       cgroup_cpu_allowed=2.0, cgroup_cpu_busy=99, cgroup_path="/ctr")  # fmt: skip
    r = judged_record(cpu=host, devices=busy, cgroup_io=[quiet], procs=workers,
                      loader=loop_figures(0.95, workers=2))  # fmt: skip
    v = decide(r, base)
    assert v.verdict == VerdictName.INPUT_CPU, v.summary
    assert "also: loop0 is busy with other work (870 MB/s" in v.summary
    # this container's own reads make it the device's limit again
    r.cgroup_io = [CgroupIO("loop0", "7:0", read_ios_s=13000, read_bytes_s=860 * 2**20)]
    assert decide(r, base).cause == Cause.DEVICE_LIMIT


def test_a_loader_with_new_settings_is_judged_at_once_not_held():
    """num_workers=0 held as input-bound; the user starts the loop again with 2 workers and a
    share of 1%: the very next interval speaks of that loop, not of the held num_workers=0
    (the demo's second phase, and a notebook cell run again)."""
    host = HostFigures(cpu_busy=60, cpu_count=2, mem_available_mb=20000)
    main = ProcessIO(pid=1, name="python", role="main", cpu_percent=100)
    diag = Diagnoser({}, hold=3)
    for _ in range(5):
        before = diag(judged_record(cpu=host, loader=loop_figures(0.5), procs=[main]))
    assert before.verdict == VerdictName.INPUT_CPU and "num_workers=0" in before.summary
    # the interval of the change holds both loops: said as a change, with no fix to try
    change = diag(judged_record(cpu=host, loader=loop_figures(0.3, workers=2), procs=[main]))
    assert change.verdict == VerdictName.UNKNOWN and not change.fixes, change
    assert "settings changed during this interval (num_workers 0 -> 2)" in change.summary
    after = diag(judged_record(cpu=host, loader=loop_figures(0.01, workers=2), procs=[main]))
    assert not VerdictName.is_input_bound(after.verdict), after.summary
    assert after.verdict != VerdictName.UNKNOWN, after.summary  # judged at once
    assert "num_workers=0" not in after.summary and after.input_share < 0.05
    # the same settings again are the same loop: held as before
    again = Diagnoser({}, hold=3)
    for share in (0.5, 0.5, 0.5, 0.5, 0.5, 0.01):
        held = again(judged_record(cpu=host, loader=loop_figures(share), procs=[main]))
    assert held.verdict == VerdictName.INPUT_CPU, held.summary
