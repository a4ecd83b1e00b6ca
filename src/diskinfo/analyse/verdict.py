"""Signals -> one verdict per interval, with its cause, the evidence behind it and the fixes.

The training loop's data-wait share (`diskinfo.torch`) decides whether the interval is
input-bound, with TensorFlow/XProf's split: >= 20% of step time "highly", >= 5% "moderately".
Where the loop is not instrumented, an idle or pulsing GPU stands in for data-wait. The cause
comes from the disk (throughput against the measured bandwidth of `diskinfo bench`, await,
queue per reader, request size; %util only as supporting evidence) and from the container's
own CPU. docs/verdicts.md explains every rule; the thresholds are in `thresholds`.
"""

from __future__ import annotations

from collections.abc import Mapping

from diskinfo import thresholds as t
from diskinfo.analyse.baseline import DeviceBaseline
from diskinfo.analyse.binding import also, binding, busy_elsewhere, ordered_fixes, own_share
from diskinfo.analyse.contention import contention
from diskinfo.analyse.evidence import capped_line, evidence
from diskinfo.analyse.fix_ids import WORKERS_FIXES, FixId
from diskinfo.analyse.fixes import SHM_FIX
from diskinfo.analyse.signals import Signals, signals
from diskinfo.analyse.start import start_words
from diskinfo.analyse.steady import SteadyShare, share_words
from diskinfo.analyse.workers import workers_target
from diskinfo.record import Cause, IntervalRecord, Verdict

# --- causes: (cause, why); the cause names the verdict ---


def _device_limit(s: Signals) -> list[str]:
    """The device itself is the limit: near its measured bandwidth, or slow to answer."""
    d = s.disk
    if d is None or not s.reading:
        return []
    why = []
    bw = s.bandwidth.seq_read_mb_s if s.bandwidth is not None else 0.0
    if bw > 0 and d.rmb_s >= t.NEAR_BANDWIDTH * bw:
        why.append(
            f"reading at {t.pct(d.rmb_s / bw, t.NEAR_BANDWIDTH)} of the measured bandwidth "
            f"({d.rmb_s:.0f} of {bw:.0f} MB/s, `diskinfo bench` at one read in flight)"
        )
    if d.r_await >= t.DISK_AWAIT_HIGH_MS:
        why.append(
            f"read await {t.shown(d.r_await, t.DISK_AWAIT_HIGH_MS)} ms >= "
            f"{t.DISK_AWAIT_HIGH_MS:.0f} ms"
        )
    if why and d.aqu_sz >= t.DISK_QUEUE_DEEP:
        why.append(f"queue {d.aqu_sz:.1f} requests deep")
    return why


def io_share_of_loading(s: Signals) -> float | None:
    """Share of the loading time that a reader spends with a read in flight: aqu-sz (reads in
    flight on average) per reader, over the time each reader spends loading (the loop's
    data-wait with num_workers=0, all of its time for a DataLoader worker)."""
    d = s.disk
    if d is None or s.share is None or s.share <= 0:
        return None
    single = s.loader is None or not s.loader.num_workers
    loading = s.share if single else 1.0
    return min(1.0, d.aqu_sz / s.readers / loading)


def _blocked_on_reads(s: Signals) -> list[str]:
    share = io_share_of_loading(s)
    if share is None or share < t.IO_SHARE_OF_LOADING or not s.reading:
        return []
    return [
        f"the reader has a read in flight {t.pct(share, t.IO_SHARE_OF_LOADING)} of its loading time"
    ]


def _cpu_side(s: Signals) -> tuple[Cause, list[str]] | None:
    """The CPU is the limit: the container's cores used up, no workers, or too few workers.
    Judged by the container's own figures only: another container's load never decides it
    (the host's figure is context in the evidence and in the fallback's words)."""
    if s.cpu_busy is not None and s.cpu_busy >= t.CPU_SATURATED_PCT:
        who = "this container's" if s.cpu_scope == "container" else "the host's"
        return Cause.CPU_SATURATED, [
            f"{who} CPU is {t.shown(s.cpu_busy, t.CPU_SATURATED_PCT)}% busy "
            f"({s.cpu_cores or 0:g} cores)"
        ]
    no_workers = s.loader is not None and s.loader.num_workers == 0
    if no_workers and s.main_wants is not None and s.main_wants >= t.PROC_SATURATED_PCT:
        return Cause.NO_WORKERS, [
            f"num_workers=0 and the training process wants "
            f"{t.shown(s.main_wants, t.PROC_SATURATED_PCT)}% of a core"
        ]
    wants = s.worker_wants
    if wants is not None and wants >= t.PROC_SATURATED_PCT:
        cores = s.cpu_cores or 0
        each = f"{t.shown(wants, t.PROC_SATURATED_PCT)}% of a core each"
        if (s.worker_cpu or 0) < wants - t.CPU_WAIT_SHOWN_PCT:  # the rest went waiting for a CPU
            each += f" (gets {s.worker_cpu or 0:.0f}%: the host's other work takes the rest)"
        if cores and s.readers >= cores:  # no core left for another worker
            return Cause.CPU_SATURATED, [
                f"{s.readers} DataLoader workers want {each} on {cores:g} cores"
            ]
        return Cause.FEW_WORKERS, [
            f"{s.workers} DataLoader worker(s) want {each}: they compute, never wait for data, "
            f"while {s.loading_cores:.1f} of {cores:g} cores load"
        ]
    return None


def _weak_disk_signs(s: Signals) -> list[str]:
    d = s.disk
    if d is None or not s.reading:
        return []
    why = []
    if d.util >= t.DISK_UTIL_SATURATED_PCT:
        util = t.shown(d.util, t.DISK_UTIL_SATURATED_PCT)
        why.append(f"%util {util}% (on NVMe/RAID this saturates early)")
    if s.host is not None and s.host.cpu_iowait >= t.IOWAIT_HIGH_PCT:
        why.append(f"iowait {t.shown(s.host.cpu_iowait, t.IOWAIT_HIGH_PCT)}%")
    return why


def load_seen(s: Signals) -> bool:
    """Some resource works while the GPU starves (for the verdict without loop figures)."""
    busy_disk = s.disk is not None and s.reading and s.disk.util >= t.DISK_BUSY_UTIL_PCT
    return bool(busy_disk or _device_limit(s) or _cpu_side(s) or _weak_disk_signs(s))


def small_files(s: Signals) -> bool:
    """Many small reads, each reader with about one in flight: per-file latency, not the
    device's bandwidth, is the limit. A stored bandwidth sharpens it (under 30% of it); it is
    not needed to see the pattern."""
    d = s.disk
    if d is None or d.r_s < t.SMALL_FILE_MIN_R_S or not 0 < d.rareq_sz < t.SMALL_REQUEST_KB:
        return False
    bw = s.bandwidth.seq_read_mb_s if s.bandwidth is not None else 0.0
    if bw > 0:
        return d.rmb_s < t.LOW_BANDWIDTH * bw
    return d.aqu_sz / s.readers <= t.SMALL_READER_QUEUE


def _disk_side(s: Signals, cause: Cause, why: list[str]) -> tuple[Cause, list[str]]:
    if small_files(s):
        d = s.disk
        assert d is not None
        return (
            Cause.SMALL_FILES,
            [f"{d.r_s:.0f} reads/s of {d.rareq_sz:.0f} kB for only {d.rmb_s:.1f} MB/s", *why],
        )
    return cause, why


def _epoch_start(s: Signals) -> list[str]:
    """Most of the loop's data-wait is for each epoch's first batch: the epoch's start
    (workers forked again, files or shards listed, a shuffle buffer filled), not the steady
    reading, is what to fix. Short epochs (a small set, frequent evaluation) show it."""
    loader = s.loader
    if (
        loader is None
        or not loader.epochs
        or loader.wait_s <= 0
        or loader.start_wait_s < t.EPOCH_START_SHARE * loader.wait_s
    ):
        return []
    loop = loader.wait_s + loader.step_s
    starts = f"{loader.epochs} epoch start" + ("s" if loader.epochs != 1 else "")
    return [
        f"waiting for each epoch's first batch: {loader.start_wait_s:.1f} s over {starts}, "
        f"{loader.start_wait_s / loop:.0%} of the loop's time "
        f"({t.pct(loader.start_wait_s / loader.wait_s, t.EPOCH_START_SHARE)} of its data-wait)"
    ]


def cause_of(s: Signals) -> tuple[Cause, list[str]]:
    """The first rule that holds names the cause, and with it the verdict (docs/verdicts.md,
    "Which input-bound?")."""
    if why := _epoch_start(s):
        return Cause.EPOCH_START, why
    if s.capped is not None:  # the container's own cap, whatever the shared device does
        return Cause.CGROUP_CAP, [capped_line(s)]
    why = _device_limit(s)
    if why:
        return _disk_side(s, Cause.DEVICE_LIMIT, why)
    why = _blocked_on_reads(s)
    if why:
        return _disk_side(s, Cause.BLOCKED_ON_READS, why)
    cpu = _cpu_side(s)
    if cpu is not None:
        return cpu
    why = _weak_disk_signs(s)
    if why:
        return _disk_side(s, Cause.DISK_BUSY, why)
    io_share = io_share_of_loading(s)
    busy = s.disk is not None and s.disk.util >= t.DISK_BUSY_UTIL_PCT
    some_io = busy or io_share is None or io_share >= t.SOME_IO_SHARE
    if s.reading and s.disk is not None and s.disk.util > 0 and some_io:
        return _disk_side(s, Cause.DISK_READING, ["the disk is reading while the loop waits"])
    why = "the loop waits for data while the disk is not busy"
    h = s.host
    if s.cpu_scope == "container" and h is not None and h.cpu_busy >= t.CPU_SATURATED_PCT:
        busy = t.shown(s.cpu_busy or 0, t.CPU_SATURATED_PCT)
        why += (
            f" and this container's CPU is not saturated ({busy}% of "
            f"{s.cpu_cores or 0:g} cores); the host is {h.cpu_busy:.0f}% busy with other work, "
            "which may slow its loaders"
        )
    return Cause.CPU_UNEXPLAINED, [why]


# --- the verdict ---


def _not_input_bound(
    s: Signals, gpu_idle: bool, record: IntervalRecord, loop_s: float | None
) -> tuple[Cause, str]:
    """(cause, summary) of an interval that is not input-bound."""
    if s.loop_active is False and gpu_idle:
        return Cause.NO_STEP, "no training step ran this interval"
    if s.share is not None or (s.gpu is not None and not gpu_idle):
        if s.share is not None:
            summary = share_words(s.steady, s.share)
            if s.severity != "none":  # input-bound in share, yet the step is the larger part
                summary += (
                    ", but the GPU does not starve: the step is the limit"
                    if s.gpu is not None
                    else ", and no GPU starves: the step is the larger part"
                )
        else:
            summary = f"GPU busy {s.gpu.util_mean:.0f}% without starving"  # type: ignore[union-attr]
        if s.gpu is not None and s.gpu.util_mean < t.GPU_BUSY_MEAN_PCT:
            summary += (
                f"; the GPU is only {t.shown(s.gpu.util_mean, t.GPU_BUSY_MEAN_PCT)}% busy, so the "
                "step itself (CPU-side work, synchronisation, small kernels) is the limit"
            )
        return Cause.STEP, summary
    if s.gpu is not None and gpu_idle:
        return Cause.GPU_IDLE, "the GPU is idle and the loop is not instrumented"
    if s.procs:  # the training command runs but publishes no loop figures
        young = s.training_s is not None and s.training_s < t.WRAP_HINT_AFTER_S
        if young or (loop_s is not None and loop_s < t.WRAP_HINT_AFTER_S):
            # still starting, or the loop not yet known to run unseen (start.loop_runs_unseen)
            age = f"{s.training_s:.0f} s ago" if s.training_s is not None else ""
            return (
                Cause.STARTING,
                f"the training command started {age} and has fetched no batch yet: "
                f"{start_words(record)}",
            )
        ran = f" after {s.training_s:.0f} s" if s.training_s is not None else ""
        if s.wrapped_not_iterated:  # the fix says which loader to wrap (fixes.wrap_fix)
            return Cause.NOT_WRAPPED, wrapped_elsewhere(s.wrapped_not_iterated, ran)
        return (
            Cause.NOT_WRAPPED,
            f"the training process runs but publishes no loop figures{ran}, and there is no GPU "
            "to judge by",
        )
    quiet_cpu = s.cpu_busy is None or s.cpu_busy < t.CPU_QUIET_PCT
    if s.disk_quiet and quiet_cpu:
        if (end := record.command_end) is not None:  # its last interval: how it ended
            return Cause.NO_TRAINING, f"the training command ended: exit status {end.code}"
        return Cause.NO_TRAINING, "no training command runs: no loop figures, disk and CPU quiet"
    what = "this container's" if s.cpu_scope == "container" else "the"
    return (
        Cause.NO_FIGURES,
        f"no training command, no loop figures and no GPU, yet {what} disk or CPU works: "
        "nothing to judge by",
    )


def wrapped_elsewhere(processes: int, ran: str) -> str:
    """What is seen of a loader that was wrapped but is not the one the loop iterates."""
    who = "the training process" if processes == 1 else f"{processes} training processes"
    return (
        f"{who} wrapped a loader with diskinfo.torch.watch but never iterated it{ran}: the loop "
        "iterates another one"
    )


def decide(
    record: IntervalRecord,
    baselines: Mapping[str, DeviceBaseline],
    training_s: float | None = None,
    contention_floor: float = t.CONTENTION_WAIT_SHARE,
    steady: SteadyShare | None = None,
    loop_s: float | None = None,
) -> Verdict:
    """One verdict for one interval; a pure function of the record, the stored baselines,
    how long the training command has run (None: not known, as if for a while), the
    run-queue wait share that makes contention (lower while contention is held: Diagnoser)
    the data-wait share over the loop's last intervals (None: this interval's alone) and how
    long the loop is known to have run without figures (None: as long as the command)."""
    s = signals(record, baselines, training_s)
    if steady is not None and s.share is not None:
        s.share, s.severity, s.steady = steady.share, steady.severity, steady
    neighbour_disk = busy_elsewhere(s)
    if s.own_reads is False:  # the device's reads are another's: never what the loop waits on
        s.reading = False
    ev = evidence(s)
    gpu_idle = s.gpu is None or s.gpu.util_mean < t.GPU_IDLE_MEAN_PCT
    contended = contention(s, contention_floor) if s.share is not None else []

    if contended:
        # moderately input-bound is enough: while starved the step waits for a core too,
        # and the data-wait share falls (8% starved, 40% fed, under the same neighbour)
        input_bound = s.severity in ("high", "moderate")
    elif s.share is not None:
        input_bound = s.severity == "high" or (s.severity == "moderate" and s.gpu_starved)
    elif s.loop_active is False:
        input_bound = False
    elif s.gpu is not None:
        # no loop figures: an idle or pulsing GPU while the disk or CPU works stands in
        input_bound = not gpu_idle and s.gpu_starved and load_seen(s)
    else:
        input_bound = False

    second: Cause | None = None  # the first limit that applies but does not bind
    if input_bound:
        found = cause_of(s)
        (cause, why), others = binding(found, contended, own_share(s, record), s.capped is not None)
        if others:
            second = Cause.CPU_CONTENTION if cause != Cause.CPU_CONTENTION else found[0]
        summary = "; ".join(why)
        if s.share is None:
            summary += " (inferred from the GPU: the loop is not instrumented)"
        elif s.steady is not None and s.steady.borderline:
            summary += f"; {share_words(s.steady, s.share)}"
    else:
        cause, summary = _not_input_bound(s, gpu_idle, record, loop_s)
        # the neighbour slows the step: said beside it, its fix first (binding.ordered_fixes)
        others = contended if cause == Cause.STEP else []
        second = Cause.CPU_CONTENTION if others else None
    if neighbour_disk and s.share is not None:
        others = [*others, neighbour_disk]
    if others:
        summary += "; " + "; ".join(also(others))
        ev.extend(also(others))

    verdict = cause.verdict
    found = ordered_fixes(cause, second, s)
    fixes, fix_ids = [f for _, f in found], [i for i, _ in found]
    errors = s.loader.worker_errors if s.loader is not None else 0
    if errors:
        shm = s.host.shm_total_mb if s.host is not None else None
        if shm is not None and t.shm_small(shm):
            ev.insert(
                0,
                f"{errors} DataLoader worker death(s) with /dev/shm only "
                f"{shm:.0f} MB (under SHM_MIN_MB={t.shm_min_mb():g})",
            )
            fixes.insert(0, SHM_FIX)
            fix_ids.insert(0, FixId.SHM_SIZE)
            summary = f"{SHM_FIX}; {summary}"
        else:
            ev.insert(0, f"{errors} DataLoader worker death(s)")
    return Verdict(
        verdict=verdict,
        summary=summary,
        evidence=ev,
        fixes=fixes,
        fix_ids=fix_ids,
        workers_target=workers_target(s) if WORKERS_FIXES & set(fix_ids) else None,
        severity=s.severity,
        input_share=s.share,
        cause=cause,
        interval_verdict=verdict,
        interval_cause=cause,
    )
