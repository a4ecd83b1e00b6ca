"""Figures -> one verdict per interval, with the evidence behind it and the fixes to try.

The training loop's data-wait share (`diskinfo.torch`) decides whether the interval is
input-bound, with TensorFlow/XProf's split: >= 20% of step time "highly", >= 5% "moderately".
Where the loop is not instrumented, an idle or pulsing GPU stands in for data-wait. Where
neither exists (no GPU, loop not wrapped) the verdict is "unknown" unless everything is quiet.
The cause of input-boundness comes from the disk (throughput against the measured bandwidth of
`diskinfo bench`, await, queue, request size; %util only as supporting evidence, because it
saturates far below the limit on NVMe and RAID) and from the CPU (host and loader processes).
docs/verdicts.md explains every rule; the thresholds are the constants below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from diskinfo.baseline import DeviceBaseline
from diskinfo.record import (
    CgroupIO,
    DeviceFigures,
    GpuFigures,
    HostFigures,
    IntervalRecord,
    LoaderFigures,
    ProcessIO,
    Verdict,
)

# --- input share (XProf) ---
HIGHLY_INPUT_BOUND = 0.20
MODERATELY_INPUT_BOUND = 0.05
LOOP_ACTIVE_SHARE = 0.10  # loop time (wait + step) per process / interval below this: not running

# --- GPU ---
GPU_IDLE_MEAN_PCT = 5.0  # mean utilisation below this: the GPU does nothing
GPU_BUSY_MEAN_PCT = 70.0
GPU_STARVED_IDLE_FRACTION = 0.25  # share of samples idle
GPU_PULSING = 0.30

# --- CPU ---
CPU_SATURATED_PCT = 90.0  # host, percent of all cores
PROC_SATURATED_PCT = 90.0  # one loader process, percent of one core
IOWAIT_HIGH_PCT = 10.0

# --- disk ---
DISK_READING_MB_S = 0.5  # below this and DISK_READING_R_S the disk is not part of the story
DISK_READING_R_S = 5.0
DISK_BUSY_UTIL_PCT = 50.0  # a request in flight half the time: the reader waits on the device
DISK_UTIL_SATURATED_PCT = 95.0
DISK_AWAIT_HIGH_MS = 20.0
DISK_QUEUE_DEEP = 4.0  # aqu-sz
NEAR_BANDWIDTH = 0.70  # share of the measured sequential bandwidth
LOW_BANDWIDTH = 0.30
SMALL_REQUEST_KB = 64.0
SMALL_FILE_MIN_R_S = 50.0
LOW_MB_S_WITHOUT_BASELINE = 50.0
IO_SHARE_OF_LOADING = 1 / 3  # a reader blocked on reads this much of its loading time

# --- memory ---
DATA_FITS_FRACTION = 0.8  # dataset <= this share of available memory: preloading is an option
SHM_SMALL_MB = 1024.0  # Docker's default is 64 MB; DataLoader workers pass batches through it

# --- sustained-condition warnings ---
AWAIT_WARN_MS = 50.0
AWAIT_WARN_S = 180.0
UTIL_WARN_PCT = 95.0
UTIL_WARN_S = 60.0
LOW_BANDWIDTH_WARN_S = 60.0

INPUT_DISK = "input-bound: disk"
INPUT_CPU = "input-bound: cpu"
INPUT_SMALL_FILES = "input-bound: small-file random reads"
COMPUTE_BOUND = "compute-bound"
IDLE = "idle"
UNKNOWN = "unknown"

SHM_FIX = (
    "DataLoader workers died and /dev/shm is small: start the container with "
    "--shm-size=16g (or --ipc=host)"
)


@dataclass
class Signals:
    """What one interval says, reduced to the figures the rules need."""

    share: float | None  # data-wait share of step time, None without loop figures
    loop_active: bool | None  # None without loop figures
    gpu: GpuFigures | None  # the most starved GPU (None: no GPU figures)
    disk: DeviceFigures | None  # the busiest watched device
    bandwidth: DeviceBaseline | None
    host: HostFigures | None
    loader: LoaderFigures | None
    worker_cpu: float | None  # mean CPU % of one core over DataLoader worker processes
    main_cpu: float | None
    procs: list[ProcessIO]
    capped: CgroupIO | None = None  # this container's reads at its cgroup's limit
    cgroup: list[CgroupIO] = field(default_factory=list)


def _watched(devices: list[DeviceFigures]) -> list[DeviceFigures]:
    return [d for d in devices if d.paths] or list(devices)


def _tops(devices: list[DeviceFigures]) -> list[DeviceFigures]:
    """The device each watched path's filesystem sits on: the first listed for the path (the
    monitor lists the top device before the disks beneath it). The loader's reads are the top
    device's; a leaf disk also carries other filesystems' traffic."""
    seen: set[str] = set()
    tops = []
    for d in devices:
        if any(p not in seen for p in d.paths):
            tops.append(d)
            seen.update(d.paths)
    return tops or list(devices)


def _busiest(devices: list[DeviceFigures]) -> DeviceFigures | None:
    tops = _tops(devices)
    return max(tops, key=lambda d: (d.util, d.rmb_s, d.r_s)) if tops else None


def _most_starved(gpus: list[GpuFigures] | None) -> GpuFigures | None:
    if not gpus:
        return None
    return max(gpus, key=lambda g: (g.idle_fraction, g.pulsing, -g.util_mean))


def _mean_cpu(procs: list[ProcessIO], role: str) -> float | None:
    values = [p.cpu_percent for p in procs if p.role == role]
    return sum(values) / len(values) if values else None


def signals(record: IntervalRecord, baselines: Mapping[str, DeviceBaseline]) -> Signals:
    loader = record.loader
    share: float | None = None
    active: bool | None = None
    if loader is not None:
        per_process = max(1, loader.processes) * max(record.elapsed_s, 1e-9)
        active = loader.processes > 0 and (loader.wait_s + loader.step_s) >= (
            LOOP_ACTIVE_SHARE * per_process
        )
        share = loader.wait_share if active else None
    disk = _busiest(record.devices)
    return Signals(
        share=share,
        loop_active=active,
        gpu=_most_starved(record.gpus),
        disk=disk,
        bandwidth=baselines.get(disk.device) if disk is not None else None,
        host=record.cpu,
        loader=loader,
        worker_cpu=_mean_cpu(record.procs, "worker"),
        main_cpu=_mean_cpu(record.procs, "main"),
        procs=record.procs,
        capped=next(
            (c for c in record.cgroup_io if {"read_iops", "read_bps"} & set(c.throttled_by)),
            None,
        ),
        cgroup=record.cgroup_io,
    )


def severity_of(share: float | None) -> str:
    if share is None:
        return ""
    if share >= HIGHLY_INPUT_BOUND:
        return "high"
    if share >= MODERATELY_INPUT_BOUND:
        return "moderate"
    return "none"


def _gpu_starved(gpu: GpuFigures | None) -> bool:
    return gpu is not None and (
        gpu.idle_fraction >= GPU_STARVED_IDLE_FRACTION or gpu.pulsing >= GPU_PULSING
    )


def _disk_reading(disk: DeviceFigures | None) -> bool:
    return disk is not None and (disk.rmb_s >= DISK_READING_MB_S or disk.r_s >= DISK_READING_R_S)


def _fits_in_ram(host: HostFigures | None) -> bool:
    return (
        host is not None
        and host.dataset_mb is not None
        and host.mem_available_mb > 0
        and host.dataset_mb <= DATA_FITS_FRACTION * host.mem_available_mb
    )


def _mb(value: float) -> str:
    return f"{value / 1024:.1f} GB" if value >= 1024 else f"{value:.0f} MB"


def _cap(c: CgroupIO) -> str:
    """The read limit a capped cgroup runs at, in words: "1000 IOPS", "50.0 MB/s"."""
    caps = []
    if "read_iops" in c.throttled_by and c.read_iops:
        caps.append(f"{c.read_iops} IOPS")
    if "read_bps" in c.throttled_by and c.read_bps:
        caps.append(f"{c.read_bps / 2**20:.1f} MB/s")
    return " and ".join(caps)


def _capped_line(s: Signals) -> str:
    c = s.capped
    assert c is not None
    how = "blkio throttle" if c.version == 1 else "io.max"
    line = (
        f"this container's reads are capped by its cgroup at {_cap(c)} ({how} on {c.device}; "
        f"it reads {c.read_ios_s:.0f} IOPS, {c.read_bytes_s / 2**20:.1f} MB/s)"
    )
    d = s.disk
    if d is None or d.util < DISK_BUSY_UTIL_PCT:
        util = f" (%util {d.util:.0f}%)" if d is not None else ""
        line += f"; the device itself is not busy{util}"
    return line


# --- evidence ---


def _evidence(s: Signals) -> list[str]:
    out: list[str] = []
    if s.share is not None:
        sev = severity_of(s.share)
        label = {"high": "HIGHLY input-bound", "moderate": "moderately input-bound"}.get(
            sev, "not input-bound"
        )
        out.append(
            f"data-wait {s.share * 100:.0f}% of step time ({label}; XProf: >= "
            f"{HIGHLY_INPUT_BOUND * 100:.0f}% highly, >= {MODERATELY_INPUT_BOUND * 100:.0f}% "
            f"moderately)"
        )
    elif s.loop_active is False:
        out.append("the training loop fetched no batches this interval")
    else:
        out.append("no training-loop figures (wrap the DataLoader with diskinfo.torch.watch)")
    if s.gpu is not None:
        g = s.gpu
        out.append(
            f"GPU {g.index}: utilisation mean {g.util_mean:.0f}% (min {g.util_min:.0f}%), idle "
            f"{g.idle_fraction * 100:.0f}% of samples, pulsing {g.pulsing:.2f} ({g.bursts} bursts)"
        )
    if s.disk is not None:
        d = s.disk
        line = (
            f"{d.device}: read {d.rmb_s:.1f} MB/s, {d.r_s:.0f} r/s of {d.rareq_sz:.1f} kB, "
            f"r_await {d.r_await:.1f} ms, aqu-sz {d.aqu_sz:.2f}, util {d.util:.0f}%"
        )
        if s.bandwidth is not None and s.bandwidth.seq_read_mb_s > 0:
            share = d.rmb_s / s.bandwidth.seq_read_mb_s
            line += (
                f"; {share * 100:.0f}% of its measured {s.bandwidth.seq_read_mb_s:.0f} MB/s"
                f" ({s.bandwidth.rand_read_iops:.0f} random 4k IOPS)"
            )
        out.append(line)
    if s.capped is not None:
        out.append(_capped_line(s))
    if s.host is not None:
        h = s.host
        out.append(f"CPU {h.cpu_busy:.0f}% busy of {h.cpu_count} cores, iowait {h.cpu_iowait:.0f}%")
        if h.dataset_mb is not None:
            fits = "fits" if _fits_in_ram(h) else "does not fit"
            out.append(
                f"dataset {_mb(h.dataset_mb)}, page cache {_mb(h.page_cache_mb)}, "
                f"{_mb(h.mem_available_mb)} available: the data {fits} in RAM"
            )
    if s.worker_cpu is not None:
        out.append(f"DataLoader workers at {s.worker_cpu:.0f}% of a core each")
    if s.loader is not None and s.loader.num_workers is not None:
        out.append(
            f"DataLoader num_workers={s.loader.num_workers}, pin_memory={s.loader.pin_memory}, "
            f"persistent_workers={s.loader.persistent_workers}"
        )
    return out


# --- causes ---


def _device_limit(s: Signals) -> list[str]:
    """The device itself is the limit: near its measured bandwidth, or slow to answer."""
    d = s.disk
    if d is None or not _disk_reading(d):
        return []
    why = []
    bw = s.bandwidth.seq_read_mb_s if s.bandwidth is not None else 0.0
    if bw > 0 and d.rmb_s >= NEAR_BANDWIDTH * bw:
        why.append(f"reading at {d.rmb_s / bw * 100:.0f}% of the measured bandwidth")
    if d.r_await >= DISK_AWAIT_HIGH_MS:
        why.append(f"read await {d.r_await:.0f} ms >= {DISK_AWAIT_HIGH_MS:.0f} ms")
    if why and d.aqu_sz >= DISK_QUEUE_DEEP:
        why.append(f"queue {d.aqu_sz:.1f} requests deep")
    return why


def _readers(s: Signals) -> int:
    if s.loader is not None and s.loader.num_workers:
        return s.loader.num_workers
    workers = sum(1 for p in s.procs if p.role == "worker")
    return max(1, workers)


def io_share_of_loading(s: Signals) -> float | None:
    """Share of the loading time that a reader spends with a read in flight: aqu-sz (reads in
    flight on average) per reader, over the time each reader spends loading (the loop's
    data-wait with num_workers=0, all of its time for a DataLoader worker)."""
    d = s.disk
    if d is None or s.share is None or s.share <= 0:
        return None
    single = s.loader is None or not s.loader.num_workers
    loading = s.share if single else 1.0
    return min(1.0, d.aqu_sz / _readers(s) / loading)


def _blocked_on_reads(s: Signals) -> list[str]:
    share = io_share_of_loading(s)
    if share is None or share < IO_SHARE_OF_LOADING or not _disk_reading(s.disk):
        return []
    return [f"the reader has a read in flight {share * 100:.0f}% of its loading time"]


def _cpu_saturated(s: Signals) -> list[str]:
    why = []
    if s.host is not None and s.host.cpu_busy >= CPU_SATURATED_PCT:
        why.append(f"host CPU {s.host.cpu_busy:.0f}% busy")
    if s.worker_cpu is not None and s.worker_cpu >= PROC_SATURATED_PCT:
        why.append(f"DataLoader workers at {s.worker_cpu:.0f}% of a core")
    no_workers = s.loader is not None and s.loader.num_workers == 0
    if no_workers and s.main_cpu is not None and s.main_cpu >= PROC_SATURATED_PCT:
        why.append(f"num_workers=0 and the training process at {s.main_cpu:.0f}% of a core")
    return why


def _weak_disk_signs(s: Signals) -> list[str]:
    d = s.disk
    if d is None or not _disk_reading(d):
        return []
    why = []
    if d.util >= DISK_UTIL_SATURATED_PCT:
        why.append(f"%util {d.util:.0f}% (on NVMe/RAID this saturates early)")
    if s.host is not None and s.host.cpu_iowait >= IOWAIT_HIGH_PCT:
        why.append(f"iowait {s.host.cpu_iowait:.0f}%")
    return why


def load_seen(s: Signals) -> bool:
    """Some resource works while the GPU starves (for the verdict without loop figures)."""
    busy_disk = s.disk is not None and _disk_reading(s.disk) and s.disk.util >= DISK_BUSY_UTIL_PCT
    return bool(busy_disk or _device_limit(s) or _cpu_saturated(s) or _weak_disk_signs(s))


def _small_files(s: Signals) -> bool:
    d = s.disk
    if d is None or d.r_s < SMALL_FILE_MIN_R_S or not 0 < d.rareq_sz < SMALL_REQUEST_KB:
        return False
    bw = s.bandwidth.seq_read_mb_s if s.bandwidth is not None else 0.0
    return d.rmb_s < LOW_BANDWIDTH * bw if bw > 0 else d.rmb_s < LOW_MB_S_WITHOUT_BASELINE


def _disk_side(s: Signals, why: list[str]) -> tuple[str, list[str]]:
    if _small_files(s):
        d = s.disk
        assert d is not None
        return INPUT_SMALL_FILES, [
            f"{d.r_s:.0f} reads/s of {d.rareq_sz:.0f} kB for only {d.rmb_s:.1f} MB/s",
            *why,
        ]
    return INPUT_DISK, why


def _cause(s: Signals) -> tuple[str, list[str]]:
    """The first rule that holds names the cause (docs/verdicts.md, "Which input-bound?")."""
    if s.capped is not None:  # the container's own cap, whatever the shared device does
        return INPUT_DISK, [_capped_line(s)]
    why = _device_limit(s)
    if why:
        return _disk_side(s, why)
    why = _blocked_on_reads(s)
    if why:
        return _disk_side(s, why)
    why = _cpu_saturated(s)
    if why:
        return INPUT_CPU, why
    why = _weak_disk_signs(s)
    if why:
        return _disk_side(s, why)
    if _disk_reading(s.disk) and s.disk is not None and s.disk.util > 0:
        return _disk_side(s, ["the disk is reading while the loop waits"])
    return INPUT_CPU, ["the loop waits for data while the disk is not busy"]


# --- fixes ---


def _workers_fix(s: Signals) -> str | None:
    loader, host = s.loader, s.host
    cores = host.cpu_count if host is not None and host.cpu_count else 0
    current = loader.num_workers if loader is not None else None
    if current is not None and cores and current >= cores:
        return None
    suggest = max(2, min(cores, 8)) if cores else 4
    if current is not None and current >= suggest:
        suggest = cores
    now = f"num_workers={current}" if current is not None else "more DataLoader workers"
    return f"raise DataLoader {now} to num_workers={suggest} ({cores or '?'} cores)"


def _fixes(verdict: str, s: Signals) -> list[str]:
    loader = s.loader
    fits = _fits_in_ram(s.host)
    host = s.host
    preload = (
        f"the dataset ({_mb(host.dataset_mb or 0)}) fits in RAM: preload it once (read every "
        "sample into memory in Dataset.__init__, or copy it to /dev/shm) and read from there"
        if fits and host is not None
        else None
    )
    workers = _workers_fix(s)
    pin = (
        "pin_memory=True with .to(device, non_blocking=True) copies"
        if loader is None or loader.pin_memory is not True
        else None
    )
    persistent = (
        "persistent_workers=True and prefetch_factor=4 (workers survive epochs and read ahead)"
        if loader is None or (loader.num_workers != 0 and loader.persistent_workers is not True)
        else None
    )
    shards = (
        "pack the small files into large sequential shards: `diskinfo pack SRC DEST` "
        "(WebDataset tar shards)"
    )
    if verdict == INPUT_SMALL_FILES:
        fixes = [preload, workers, shards, persistent]
    elif verdict == INPUT_DISK:
        c = s.capped
        fixes = [
            (
                f"raise or remove this container's cgroup read limit ({_cap(c)} on {c.device}): "
                "docker run --device-read-iops / --device-read-bps, or the IO limit that "
                "Kubernetes' runtime or systemd sets (IOReadIOPSMax=, IOReadBandwidthMax=; "
                "cgroup v2 io.max)"
            )
            if c is not None
            else None,
            preload,
            "move the data to faster local storage (local NVMe, /dev/shm) or store it compressed",
            shards if s.disk is not None and s.disk.rareq_sz < SMALL_REQUEST_KB else None,
            workers if s.disk is not None and s.disk.aqu_sz < 1 else None,
            persistent,
        ]
    elif verdict == INPUT_CPU:
        fixes = [
            workers,
            pin,
            persistent,
            "make per-sample work cheaper: decode/augment on the GPU (torchvision.transforms.v2 "
            "on tensors, NVIDIA DALI) or cache preprocessed samples",
            preload,
        ]
    elif verdict == COMPUTE_BOUND:
        fixes = [
            "the input pipeline keeps up: speed up the step itself (mixed precision with "
            "torch.autocast, torch.compile, a larger batch)"
        ]
    else:
        fixes = []
    return [f for f in fixes if f]


# --- the verdict ---


def decide(record: IntervalRecord, baselines: Mapping[str, DeviceBaseline]) -> Verdict:
    """One verdict for one interval; a pure function of the record and the stored baselines."""
    s = signals(record, baselines)
    evidence = _evidence(s)
    severity = severity_of(s.share)
    gpu_idle = s.gpu is None or s.gpu.util_mean < GPU_IDLE_MEAN_PCT

    if s.share is not None:
        input_bound = severity == "high" or (severity == "moderate" and _gpu_starved(s.gpu))
    elif s.loop_active is False:
        input_bound = False
    elif s.gpu is not None:
        # no loop figures: an idle or pulsing GPU while the disk or CPU works stands in
        input_bound = not gpu_idle and _gpu_starved(s.gpu) and load_seen(s)
    else:
        input_bound = False

    if input_bound:
        verdict, why = _cause(s)
        summary = "; ".join(why)
        if s.share is None:
            summary += " (inferred from the GPU: the loop is not instrumented)"
    elif s.loop_active is False and gpu_idle:
        verdict, summary = IDLE, "no training step ran this interval"
    elif s.share is not None or (s.gpu is not None and not gpu_idle):
        verdict = COMPUTE_BOUND
        if s.share is not None:
            summary = f"the loop waits for data only {s.share * 100:.0f}% of step time"
        else:
            summary = f"GPU busy {s.gpu.util_mean:.0f}% without starving"  # type: ignore[union-attr]
        if s.gpu is not None and s.gpu.util_mean < GPU_BUSY_MEAN_PCT:
            summary += (
                f"; the GPU is only {s.gpu.util_mean:.0f}% busy, so the step itself (CPU-side "
                "work, synchronisation, small kernels) is the limit"
            )
    elif (
        s.gpu is None
        and not _disk_reading(s.disk)
        and (s.host is None or s.host.cpu_busy < CPU_SATURATED_PCT / 3)
    ):
        verdict, summary = IDLE, "no GPU figures, no loop figures, disk and CPU quiet"
    elif gpu_idle and s.gpu is not None:
        verdict, summary = IDLE, "the GPU is idle and the loop is not instrumented"
    else:
        verdict = UNKNOWN
        if s.procs:  # the training command runs: starting up, or its loop is not wrapped
            summary = (
                "the training process publishes no loop figures (yet): no GPU to judge by; "
                "wrap its DataLoader with diskinfo.torch.watch"
            )
        else:
            summary = "no loop and no GPU figures: wrap the DataLoader with diskinfo.torch.watch"

    fixes = _fixes(verdict, s)
    host = s.host
    if (
        s.loader is not None
        and s.loader.worker_errors > 0
        and host is not None
        and host.shm_total_mb is not None
        and host.shm_total_mb < SHM_SMALL_MB
    ):
        evidence.insert(
            0,
            f"{s.loader.worker_errors} DataLoader worker death(s) with /dev/shm only "
            f"{host.shm_total_mb:.0f} MB",
        )
        fixes.insert(0, SHM_FIX)
        summary = f"{SHM_FIX}; {summary}"
    elif s.loader is not None and s.loader.worker_errors > 0:
        evidence.insert(0, f"{s.loader.worker_errors} DataLoader worker death(s)")
    return Verdict(
        verdict=verdict,
        summary=summary,
        evidence=evidence,
        fixes=fixes,
        severity=severity,
        input_share=s.share,
    )


class Diagnoser:
    """The monitor's analyser: `decide` plus the state that sustained-condition warnings need."""

    def __init__(
        self,
        baselines: Mapping[str, DeviceBaseline] | Callable[[], Mapping[str, DeviceBaseline]],
    ) -> None:
        self._baselines = baselines
        self._held: dict[str, float] = {}  # condition key -> seconds it has held

    def _hold(self, key: str, condition: bool, elapsed: float) -> float:
        if condition:
            self._held[key] = self._held.get(key, 0.0) + elapsed
        else:
            self._held.pop(key, None)
        return self._held.get(key, 0.0)

    def __call__(self, record: IntervalRecord) -> Verdict:
        baselines = self._baselines() if callable(self._baselines) else self._baselines
        verdict = decide(record, baselines)
        elapsed = record.elapsed_s
        input_bound = verdict.verdict.startswith("input-bound")
        for d in _watched(record.devices):
            await_ms = max(d.r_await, d.w_await)
            held = self._hold(f"await:{d.device}", await_ms > AWAIT_WARN_MS, elapsed)
            if held >= AWAIT_WARN_S:
                verdict.warnings.append(
                    f"{d.device}: await {await_ms:.0f} ms above {AWAIT_WARN_MS:.0f} ms for "
                    f"{held / 60:.1f} min"
                )
            held = self._hold(f"util:{d.device}", d.util > UTIL_WARN_PCT, elapsed)
            if held >= UTIL_WARN_S:
                verdict.warnings.append(
                    f"{d.device}: %util above {UTIL_WARN_PCT:.0f}% for {held:.0f} s (on NVMe and "
                    "RAID %util saturates early: check await and MB/s against the bandwidth)"
                )
            base = baselines.get(d.device)
            low = (
                input_bound
                and base is not None
                and base.seq_read_mb_s > 0
                and d.rmb_s < LOW_BANDWIDTH * base.seq_read_mb_s
            )
            held = self._hold(f"lowbw:{d.device}", low, elapsed)
            if low and held >= LOW_BANDWIDTH_WARN_S:
                assert base is not None
                verdict.warnings.append(
                    f"{d.device}: input-bound while reading {d.rmb_s:.1f} MB/s, under "
                    f"{LOW_BANDWIDTH * 100:.0f}% of its measured {base.seq_read_mb_s:.0f} MB/s "
                    f"for {held:.0f} s: the access pattern, not the device, is the limit"
                )
        return verdict
