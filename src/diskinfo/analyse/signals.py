"""One interval reduced to the facts the rules need, each derived once.

`busiest_device(record)` is the device the verdict (and `diskinfo report`) speaks for: of the
devices each watched path's filesystem sits on (the first listed for the path: the monitor
lists the top device before the disks beneath it, which also carry other filesystems'
traffic), the busiest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from diskinfo import thresholds as t
from diskinfo.analyse.baseline import DeviceBaseline
from diskinfo.record import (
    CgroupIO,
    DeviceFigures,
    GpuFigures,
    HostFigures,
    IntervalRecord,
    LoaderFigures,
    ProcessIO,
    training_gpus,
)

if TYPE_CHECKING:
    from diskinfo.analyse.steady import SteadyShare


def watched(devices: list[DeviceFigures]) -> list[DeviceFigures]:
    return [d for d in devices if d.paths] or list(devices)


def top_devices(devices: list[DeviceFigures]) -> list[DeviceFigures]:
    """The device each watched path's filesystem sits on (the first listed for the path)."""
    seen: set[str] = set()
    tops = []
    for d in devices:
        if any(p not in seen for p in d.paths):
            tops.append(d)
            seen.update(d.paths)
    return tops or list(devices)


def busiest_device(record: IntervalRecord) -> DeviceFigures | None:
    """The top device with the highest (%util, MB/s, r/s): the one the verdict names."""
    return _busiest(top_devices(record.devices))


def _busiest(tops: list[DeviceFigures]) -> DeviceFigures | None:
    return max(tops, key=lambda d: (d.util, d.rmb_s, d.r_s)) if tops else None


def most_starved(gpus: list[GpuFigures] | None) -> GpuFigures | None:
    """Of the training's GPUs (`record.training_gpus`), the one waiting most: a DDP run is as
    fast as its slowest rank. GPUs the training does not use never speak for it."""
    judged = training_gpus(gpus)
    if not judged:
        return None
    return max(judged, key=lambda g: (g.idle_fraction, g.pulsing, -g.util_mean))


def _mean_cpu(procs: list[ProcessIO], role: str, wanted: bool = False) -> float | None:
    """Mean CPU % of one core over the role's processes (`wanted`: plus the time they waited
    for a CPU: what they would have used on an idle host); a process with no figure yet (0)
    is left out."""
    values = [
        p.cpu_percent + (p.cpu_wait_percent if wanted else 0.0)
        for p in procs
        if p.role == role and p.cpu_percent > 0
    ]
    return sum(values) / len(values) if values else None


def run_queue_wait(procs: list[ProcessIO]) -> tuple[float, float] | None:
    """(share of the wanted CPU time spent waiting for a core, % of one core wanted) over the
    training processes and their workers; None when they want too little to judge."""
    loop = [p for p in procs if p.role in ("main", "worker")]
    wanted = sum(p.cpu_percent + p.cpu_wait_percent for p in loop)
    if wanted < t.CONTENTION_MIN_WANTED_PCT:
        return None
    return sum(p.cpu_wait_percent for p in loop) / wanted, wanted


def read_caps(c: CgroupIO) -> list[str]:
    """The cgroup read limits `c` reads at or near ("read_iops", "read_bps"): throttled, or
    within CAP_NEAR_SHARE of the limit (an epoch boundary dips under the throttled line while
    the cap still sets the pace)."""
    near = [
        key
        for key, rate in (("read_iops", c.read_ios_s), ("read_bps", c.read_bytes_s))
        if getattr(c, key) and rate >= t.CAP_NEAR_SHARE * getattr(c, key)
    ]
    return [k for k in ("read_iops", "read_bps") if k in c.throttled_by or k in near]


def loop_running(loader: LoaderFigures, elapsed_s: float) -> bool:
    """The loop ran for LOOP_ACTIVE_SHARE of the interval, per training process."""
    per_process = max(1, loader.processes) * max(elapsed_s, 1e-9)
    return loader.processes > 0 and (loader.wait_s + loader.step_s) >= (
        t.LOOP_ACTIVE_SHARE * per_process
    )


def severity_of(share: float | None) -> str:
    if share is None:
        return ""
    if share >= t.HIGHLY_INPUT_BOUND:
        return "high"
    if share >= t.MODERATELY_INPUT_BOUND:
        return "moderate"
    return "none"


def disk_reading(disk: DeviceFigures | None) -> bool:
    return disk is not None and (
        disk.rmb_s >= t.DISK_READING_MB_S or disk.r_s >= t.DISK_READING_R_S
    )


def others_reads(disk: DeviceFigures | None, procs: list[ProcessIO]) -> bool:
    """The device reads, but the training's processes read only a small share of that from
    storage: another program's reads, not the training's data. Only where their reads are
    known: a process whose /proc/PID/io could not be read shows 0 for both counters, one
    that reads at all shows read() bytes (rchar), page-cache hits included."""
    if not disk_reading(disk) or not any(p.rchar_mb_s > 0 for p in procs):
        return False
    assert disk is not None
    training = sum(p.read_mb_s for p in procs)
    return training < t.TRAINING_READ_SHARE * disk.rmb_s


def fits_in_ram(host: HostFigures | None) -> bool:
    return (
        host is not None
        and host.dataset_mb is not None
        and host.mem_available_mb > 0
        and host.dataset_mb <= t.DATA_FITS_FRACTION * host.mem_available_mb
    )


@dataclass
class Signals:
    """What one interval says, reduced to the figures the rules need."""

    share: float | None  # data-wait share of step time, None without loop figures
    loop_active: bool | None  # None without loop figures
    gpu: GpuFigures | None  # the training's most starved GPU (None: none judged)
    disk: DeviceFigures | None  # busiest_device(record)
    bandwidth: DeviceBaseline | None
    host: HostFigures | None
    loader: LoaderFigures | None
    worker_cpu: float | None  # mean CPU % of one core over DataLoader worker processes
    main_cpu: float | None
    procs: list[ProcessIO]
    capped: CgroupIO | None = None  # this container's reads at its cgroup's limit
    worker_wants: float | None = None  # worker_cpu + the time they waited for a CPU
    main_wants: float | None = None
    # derived once
    severity: str = ""
    gpu_starved: bool = False
    gpu_in_use: bool = False  # a GPU exists and something ran on it: GPU fixes apply
    reading: bool = False  # the busiest device reads at all
    fits: bool = False  # the dataset fits in available memory
    cpu_busy: float | None = None  # percent of the cores the container may use
    cpu_cores: float | None = None  # cores the container may use
    cpu_scope: str = ""  # "container" (its cgroup) or "host"
    own_reads: bool | None = None  # this container reads a watched device (None: no cgroup I/O)
    workers: int = 0  # DataLoader worker processes seen
    training_s: float | None = None  # how long a training command has run (Diagnoser)
    wrapped_not_iterated: int = 0  # processes that wrapped a loader the loop does not iterate
    steady: SteadyShare | None = None  # the share over the loop's last intervals (Diagnoser)

    @property
    def disk_quiet(self) -> bool:
        """This container reads nothing: its cgroup's own I/O where known, else the device's."""
        return not self.own_reads if self.own_reads is not None else not self.reading

    @property
    def ranks(self) -> int:
        """Training processes with a DataLoader of their own: the ranks of a DDP run, each with
        its num_workers (1 for a single process, or when the loop publishes nothing)."""
        return max(1, self.loader.processes) if self.loader is not None else 1

    @property
    def readers(self) -> int:
        """Processes that read samples: every rank's DataLoader workers, else the ranks."""
        if self.loader is not None and self.loader.num_workers:
            return self.loader.num_workers * self.ranks
        return max(self.ranks, self.workers)

    @property
    def loading_cores(self) -> float:
        """Cores' worth of CPU the loaders use (workers, or the main process with 0)."""
        cpus = [p.cpu_percent for p in self.procs if p.role == "worker"]
        if not cpus and self.main_cpu is not None:
            cpus = [self.main_cpu]
        return sum(cpus) / 100.0


def _cpu(host: HostFigures | None) -> tuple[float | None, float | None, str]:
    if host is None:
        return None, None, ""
    if host.cgroup_cpu_busy is not None and host.cgroup_path not in (None, "/"):
        return host.cgroup_cpu_busy, host.cgroup_cpu_allowed, "container"
    cores = host.cgroup_cpu_allowed or float(host.cpu_count or 0) or None
    if host.cgroup_cpu_busy is not None:  # the root cgroup: the host, with its cpuset
        return host.cgroup_cpu_busy, cores, "host"
    return host.cpu_busy, cores, "host"


def signals(
    record: IntervalRecord,
    baselines: Mapping[str, DeviceBaseline],
    training_s: float | None = None,
) -> Signals:
    loader = record.loader
    share: float | None = None
    active: bool | None = None
    if loader is not None:
        active = loop_running(loader, record.elapsed_s)
        share = loader.wait_share if active else None
    tops = top_devices(record.devices)
    disk = _busiest(tops)
    gpu = most_starved(record.gpus)
    cpu_busy, cores, scope = _cpu(record.cpu)
    devices = {d.device for d in tops}
    own = [c for c in record.cgroup_io if c.device in devices]
    return Signals(
        share=share,
        loop_active=active,
        gpu=gpu,
        disk=disk,
        bandwidth=baselines.get(disk.device) if disk is not None else None,
        host=record.cpu,
        loader=loader,
        worker_cpu=_mean_cpu(record.procs, "worker"),
        main_cpu=_mean_cpu(record.procs, "main"),
        worker_wants=_mean_cpu(record.procs, "worker", wanted=True),
        main_wants=_mean_cpu(record.procs, "main", wanted=True),
        procs=record.procs,
        capped=next((c for c in record.cgroup_io if read_caps(c)), None),
        severity=severity_of(share),
        gpu_starved=gpu is not None
        and (gpu.idle_fraction >= t.GPU_STARVED_IDLE_FRACTION or gpu.pulsing >= t.GPU_PULSING),
        gpu_in_use=any(g.util_max >= t.GPU_IN_USE_PCT for g in training_gpus(record.gpus)),
        # the disk rules judge the training's reads: a device busy with another program's
        # reads (an apt-get beside the training) does not read for the loop
        reading=disk_reading(disk) and not others_reads(disk, record.procs),
        fits=fits_in_ram(record.cpu) and not record.unwatched_data,
        cpu_busy=cpu_busy,
        cpu_cores=cores,
        cpu_scope=scope,
        own_reads=any(
            c.read_ios_s >= t.DISK_READING_R_S or c.read_bytes_s >= t.DISK_READING_MB_S * 2**20
            for c in own
        )
        if own
        else None,
        workers=sum(1 for p in record.procs if p.role == "worker"),
        training_s=training_s,
        wrapped_not_iterated=record.wrapped_not_iterated,
    )
