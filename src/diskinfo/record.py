"""The interval record: the one structure that flows from collectors to analysis to sinks.

Every JSONL line written by the monitor is `IntervalRecord.to_dict()`; the schema is versioned
by `SCHEMA` and documented in docs/jsonl-schema.md. Add fields, never rename them: readers
(`diskinfo report`, dashboards, users' notebooks) must keep working across versions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from diskinfo.rank_record import RankFigures

SCHEMA = "diskinfo.interval/1"
NO_VERDICT = "no verdict"  # intervals recorded without a verdict (analysis failed or off)


@dataclass
class DeviceFigures:
    """The `iostat -x` set for one block device over one interval (rates per second)."""

    device: str  # kernel name, e.g. "nvme0n1", "vda", "dm-0"
    paths: list[str] = field(default_factory=list)  # watched paths that live on this device
    r_s: float = 0.0
    w_s: float = 0.0
    rmb_s: float = 0.0  # MB/s with MB = 2**20 bytes, as iostat -m
    wmb_s: float = 0.0
    rrqm_s: float = 0.0
    wrqm_s: float = 0.0
    r_await: float = 0.0  # ms
    w_await: float = 0.0
    aqu_sz: float = 0.0
    rareq_sz: float = 0.0  # kB (1024 bytes), as iostat
    wareq_sz: float = 0.0
    util: float = 0.0  # percent
    in_flight: int = 0
    # discard and flush: None where the kernel does not report them
    d_s: float | None = None
    dmb_s: float | None = None
    drqm_s: float | None = None
    d_await: float | None = None
    dareq_sz: float | None = None
    f_s: float | None = None
    f_await: float | None = None
    # iostat's %rrqm/%wrqm/%drqm, and the interval's exact byte counts (sectors * 512)
    rrqm_pct: float = 0.0
    wrqm_pct: float = 0.0
    drqm_pct: float | None = None
    read_bytes: int = 0
    write_bytes: int = 0
    # seconds between the two /proc/diskstats reads these rates come from (monotonic clock,
    # taken at each read): within a millisecond of the record's elapsed_s, and exact
    elapsed_s: float | None = None
    # cumulative /proc/diskstats counters at the end of the interval, for Prometheus (which
    # computes its own rates): raw kernel values keyed by sources.diskstats field names
    # ("rd_ios", "rd_sectors", "rd_ticks", ..., "io_ticks", "rq_ticks"; None fields left out).
    # None: the collector did not fill it
    counters: dict[str, int] | None = None


@dataclass
class NfsFigures:
    """Per-mount NFS figures from /proc/self/mountstats, as nfsiostat computes them."""

    mount: str
    server: str
    read_bytes_s: float = 0.0
    write_bytes_s: float = 0.0
    read_ops_s: float = 0.0
    write_ops_s: float = 0.0
    read_rtt_ms: float = 0.0
    write_rtt_ms: float = 0.0
    read_exe_ms: float = 0.0
    write_exe_ms: float = 0.0
    retrans: int = 0
    # cumulative mountstats counters for Prometheus; keys: NFS_COUNTERS of
    # diskinfo.sinks.prometheus.metrics
    counters: dict[str, int] | None = None


@dataclass
class CgroupIO:
    """This process's cgroup (the container's) on one watched device: its own I/O, not the
    whole device's, and the throttle limits it runs under (sources/cgroup.py)."""

    device: str  # kernel name
    majmin: str
    cgroup: str = ""  # the cgroup's directory as read
    version: int = 0  # 1: v1 blkio controller, 2: unified io controller
    read_bytes_s: float = 0.0
    write_bytes_s: float = 0.0
    read_ios_s: float = 0.0
    write_ios_s: float = 0.0
    # limits per second (v1 blkio.throttle.*_device, v2 io.max); None: no limit
    read_bps: int | None = None
    write_bps: int | None = None
    read_iops: int | None = None
    write_iops: int | None = None
    throttled: bool = False  # a rate within THROTTLED_SHARE of its limit
    throttled_by: list[str] = field(default_factory=list)  # "read_iops", ...
    pressure_some_avg10: float | None = None  # io.pressure, % of time (whole cgroup)
    pressure_full_avg10: float | None = None
    # cumulative counters: read_bytes, write_bytes, read_ios, write_ios (+ discard_*)
    counters: dict[str, int] | None = None


@dataclass
class GpuFigures:
    """One GPU summarised over one interval from samples taken at >= 10 Hz."""

    index: int
    name: str = ""
    util_mean: float = 0.0  # percent
    util_min: float = 0.0
    util_max: float = 0.0
    idle_fraction: float = 0.0  # share of samples with utilisation below the idle threshold
    pulsing: float = 0.0  # 0..1: bursts of high utilisation between idle gaps (docs/verdicts.md)
    mem_used_mb: float = 0.0
    mem_total_mb: float = 0.0
    pcie_rx_mb_s: float = 0.0
    pcie_tx_mb_s: float = 0.0
    power_w: float = 0.0
    samples: int = 0  # utilisation samples (0: none, e.g. a MIG-enabled or lost GPU)
    bursts: int = 0  # busy runs separated by idle gaps within the interval
    uuid: str = ""
    # whether the training command's tree uses it (docs/gpu.md): None where nothing could
    # tell (records from before the field, or no hint at all), judged as every GPU was before
    training: bool | None = None
    training_by: str = ""  # the hint that decided it: wrapper, nvml-pids, visible-devices, memory
    state: str = ""  # "" while sampled; "no-utilisation" (MIG), "lost" (fell off the bus)


def training_gpus(gpus: list[GpuFigures] | None) -> list[GpuFigures]:
    """The GPUs a verdict, a summary or a mean speaks for: those the training uses (or not known
    to be unused) whose utilisation is read. A GPU nobody in the training uses is shown, as
    unused, and never judged: one busy GPU of eight is a busy node, not a 12% busy one."""
    return [g for g in gpus or [] if g.training is not False and not g.state]


@dataclass
class HostFigures:
    """Host CPU and memory over one interval."""

    cpu_busy: float = 0.0  # percent of all cores
    cpu_iowait: float = 0.0  # percent
    cpu_count: int = 0
    page_cache_mb: float = 0.0
    mem_total_mb: float = 0.0
    mem_available_mb: float = 0.0
    dataset_mb: float | None = None  # size of the watched data paths, where measured
    shm_total_mb: float | None = None
    # the monitor's own cgroup (the container's): what the verdict judges the CPU by. None:
    # no cgroup CPU files readable (the host's figures above are then used)
    cgroup_cpu_cores: float | None = None  # cores' worth of CPU time the cgroup used
    cgroup_cpu_allowed: float | None = None  # cores it may use: quota, cpuset, host cores
    cgroup_cpu_busy: float | None = None  # percent of cgroup_cpu_allowed in use
    cgroup_cpu_quota: float | None = None  # cores by quota (v1 cfs_quota_us, v2 cpu.max)
    cgroup_cpu_throttled: float | None = None  # share of quota periods throttled, 0..1
    cgroup_path: str | None = None  # e.g. "/docker/ab12"; "/" is the whole host


@dataclass
class ProcessIO:
    """Reads of one process of the training command's tree over one interval."""

    pid: int
    name: str
    read_mb_s: float = 0.0
    read_bytes_total: int = 0
    cpu_percent: float = 0.0
    role: str = ""  # "main", "worker", ...
    rchar_mb_s: float = 0.0  # all read() bytes, page-cache hits included (/proc/PID/io rchar)
    # % of one core's time it was runnable but waited for a CPU (/proc/PID/schedstat): with
    # cpu_percent, what it wanted; another container's load takes from the one, not the sum
    cpu_wait_percent: float = 0.0


@dataclass
class LoaderFigures:
    """The training loop's own view: time waiting for the next batch vs. time in the step."""

    batches: int = 0
    wait_s: float = 0.0
    step_s: float = 0.0
    wait_share: float = 0.0  # wait / (wait + step), 0..1
    batches_s: float = 0.0
    worker_errors: int = 0  # DataLoader worker deaths seen (e.g. Bus error from a small /dev/shm)
    processes: int = 0  # training processes publishing loader figures
    num_workers: int | None = None  # DataLoader settings as published (None: not a DataLoader)
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    samples: int = 0  # samples in those batches (leading dimension; 0: not countable)
    epochs: int = 0  # epochs (iterators) started in the interval
    start_wait_s: float = 0.0  # of wait_s: waiting for those epochs' first batches
    gpu_uuids: list[str] = field(default_factory=list)  # CUDA devices the processes use
    # ranks of distributed jobs among them; the largest world size (> 1: steps include waits)
    ranks: list[RankFigures] = field(default_factory=list)
    world_size: int | None = None


class _Word(str, Enum):
    """A public string held as an enumeration member: JSONL, the log and Prometheus see its
    value, and a misspelt name fails where it is written, not in the fixes it selects.
    (enum.StrEnum would do, but the image's Python is 3.10.)"""

    def __str__(self) -> str:
        return self.value


class VerdictName(_Word):
    """What an interval means: the `verdict` and `interval_verdict` strings of the JSONL."""

    INPUT_DISK = "input-bound: disk"
    INPUT_CPU = "input-bound: cpu"
    INPUT_SMALL_FILES = "input-bound: small-file random reads"
    COMPUTE_BOUND = "compute-bound"
    WAITS_FOR_RANK = "waits for another rank"  # a rank's step waits for another's data
    IDLE = "idle"
    UNKNOWN = "unknown"

    input_bound: bool  # the input-bound family (set below: read per sample, so no property)

    @staticmethod
    def is_input_bound(name: str) -> bool:
        """The input-bound family, also for a name read back from JSONL (a plain str)."""
        return name in _INPUT_BOUND


_INPUT_BOUND = frozenset(
    v.value for v in (VerdictName.INPUT_DISK, VerdictName.INPUT_CPU, VerdictName.INPUT_SMALL_FILES)
)
for _name in VerdictName:
    _name.input_bound = _name.value in _INPUT_BOUND
VERDICTS = tuple(VerdictName)


class Cause(_Word):
    """The rule that named a verdict: the `cause` and `interval_cause` strings of the JSONL.
    Each cause belongs to one verdict (`verdict`); docs/verdicts.md explains each rule."""

    verdict: VerdictName

    def __new__(cls, value: str, verdict: VerdictName) -> Cause:
        member = str.__new__(cls, value)
        member._value_ = value
        member.verdict = verdict
        return member

    EPOCH_START = "epoch-start", VerdictName.INPUT_CPU
    CGROUP_CAP = "cgroup-cap", VerdictName.INPUT_DISK
    DEVICE_LIMIT = "device-limit", VerdictName.INPUT_DISK
    BLOCKED_ON_READS = "blocked-on-reads", VerdictName.INPUT_DISK
    DISK_BUSY = "disk-busy", VerdictName.INPUT_DISK
    DISK_READING = "disk-reading", VerdictName.INPUT_DISK
    SMALL_FILES = "small-files", VerdictName.INPUT_SMALL_FILES
    CPU_SATURATED = "cpu-saturated", VerdictName.INPUT_CPU
    NO_WORKERS = "no-workers", VerdictName.INPUT_CPU
    FEW_WORKERS = "few-workers", VerdictName.INPUT_CPU
    CPU_UNEXPLAINED = "cpu-unexplained", VerdictName.INPUT_CPU
    CPU_CONTENTION = "cpu-contention", VerdictName.INPUT_CPU
    STEP = "step", VerdictName.COMPUTE_BOUND
    JOB_STEP = "job-step", VerdictName.COMPUTE_BOUND  # one rank of several, on its own word
    OTHER_RANK = "other-rank", VerdictName.WAITS_FOR_RANK
    NO_STEP = "no-step", VerdictName.IDLE
    GPU_IDLE = "gpu-idle", VerdictName.IDLE
    NO_TRAINING = "no-training", VerdictName.IDLE
    STARTING = "starting", VerdictName.UNKNOWN
    NOT_WRAPPED = "not-wrapped", VerdictName.UNKNOWN
    NO_FIGURES = "no-figures", VerdictName.UNKNOWN


@dataclass
class Verdict:
    """What the interval means, in plain words, with the evidence and the fixes to try."""

    verdict: str  # a VerdictName (a plain str when read back from JSONL)
    summary: str = ""
    evidence: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    fix_ids: list[str] = field(default_factory=list)  # each fix's analyse.fix_ids.FixId
    # the num_workers the first num_workers fix among `fixes` names (None: none names one), so
    # a run's summary can tell the fix was applied without reading its words
    workers_target: int | None = None
    severity: str = ""  # input-bound severity, XProf split: "high" >= 20%, "moderate" >= 5%, "none"
    input_share: float | None = None  # data-wait share of step time, 0..1, where measured
    warnings: list[str] = field(default_factory=list)  # sustained conditions (disk await, ...)
    # stability (docs/verdicts.md, "The held verdict"): `verdict` above is the held verdict,
    # which changes only after another one has been decided for a window of intervals;
    # `interval_verdict` is this interval's own decision, `cause` names the rule behind the
    # held verdict (a Cause: "cgroup-cap", "small-files", ...) and `interval_cause` this
    # interval's (both plain str when read back from JSONL)
    cause: str = ""
    interval_verdict: str = ""
    interval_cause: str = ""
    held_s: float = 0.0  # how long the held verdict has been held
    notes: list[str] = field(default_factory=list)  # once-only notes (no baseline, ...)

    def but(self, **changes: Any) -> Verdict:
        """A copy with `changes`: dataclasses.replace without its walk over the fields (the
        analyser makes one per interval). New fixes drop the old ones' num_workers target."""
        if "fixes" in changes:
            changes.setdefault("workers_target", None)
        return Verdict(**{**self.__dict__, **changes})


@dataclass(frozen=True)
class CommandEnd:
    """How the training command ended (the image's run-train.sh writes its exit status beside
    the PID file): the run's closing line says it, and the first record after the end carries
    it, so that `diskinfo report` can say a run failed from the JSONL alone."""

    code: int
    ran_s: float | None  # from its start (the PID file written) to its end
    at: float | None = None  # Unix seconds of its end


@dataclass
class IntervalRecord:
    """Everything the monitor knows about one interval."""

    ts: float  # wall-clock end of the interval, Unix seconds (for humans and joins)
    elapsed_s: float  # measured length of the interval (monotonic), the divisor of every rate
    schema: str = SCHEMA
    host: str = ""
    # Unix seconds at which the monitor started: the same in every record of one run, so the
    # runs that one diskinfo.jsonl gathers (one per container start) can be told apart
    started: float = 0.0
    devices: list[DeviceFigures] = field(default_factory=list)
    nfs: list[NfsFigures] = field(default_factory=list)
    gpus: list[GpuFigures] | None = None  # None: no GPU or no NVML (said once in the log)
    cpu: HostFigures | None = None
    procs: list[ProcessIO] = field(default_factory=list)
    loader: LoaderFigures | None = None
    verdict: Verdict | None = None
    warnings: list[str] = field(default_factory=list)
    cgroup_io: list[CgroupIO] = field(default_factory=list)  # own cgroup, per watched device
    # training processes that wrapped a loader with diskinfo.torch.watch but iterated none,
    # counted when no process iterates one (`loader` is then None): the loop runs another
    # loader, e.g. the one Accelerate's `prepare` built from the wrapped one
    wrapped_not_iterated: int = 0
    # the training command's line (the PID file's process; else the first process that
    # publishes loop figures), at most 200 characters, values of options named like secrets
    # (--token=..., --api-key ...) replaced by ***: `diskinfo report` names each run by it
    command: str = ""
    # folders the training's processes had data files open in that no watched path covers
    # (looked at every UNWATCHED_REFRESH_S; empty: none seen): the disk and dataset figures
    # are then not of its data (the demo's /tmp), and no fix is sized from them
    unwatched_data: list[str] = field(default_factory=list)
    # how the training command ended: in the first record written after its end (the monitor
    # writes one more, shorter interval when it is stopped before that), else None
    command_end: CommandEnd | None = None

    # The analyser's account of the held verdict across intervals (analyse.account.HeldAccount,
    # not named here: the record sits below the analysis), for the sinks that put it into
    # words. Not a field: never written to the JSONL (orjson leaves out an attribute named
    # with an underscore, to_dict takes the fields alone), nor compared; a record read back
    # from the JSONL, or judged by anything but the Diagnoser, has none.
    @property
    def account(self) -> Any:
        return self.__dict__.get("_account")

    @account.setter
    def account(self, value: Any) -> None:
        self.__dict__["_account"] = value

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> IntervalRecord:
        """Inverse of to_dict; unknown keys (from newer writers) are ignored."""

        def build(kind: type, value: Any) -> Any:
            if value is None:
                return None
            names = {f.name for f in dataclasses.fields(kind)}
            return kind(**{k: v for k, v in value.items() if k in names})

        names = {f.name for f in dataclasses.fields(cls)}
        plain = {k: v for k, v in data.items() if k in names}
        plain["devices"] = [build(DeviceFigures, d) for d in data.get("devices", [])]
        plain["nfs"] = [build(NfsFigures, d) for d in data.get("nfs", [])]
        gpus = data.get("gpus")
        plain["gpus"] = None if gpus is None else [build(GpuFigures, g) for g in gpus]
        plain["cpu"] = build(HostFigures, data.get("cpu"))
        plain["procs"] = [build(ProcessIO, p) for p in data.get("procs", [])]
        plain["loader"] = build(LoaderFigures, data.get("loader"))
        if plain["loader"] is not None:
            plain["loader"].ranks = [build(RankFigures, r) for r in plain["loader"].ranks or []]
        plain["verdict"] = build(Verdict, data.get("verdict"))
        plain["cgroup_io"] = [build(CgroupIO, c) for c in data.get("cgroup_io", [])]
        plain["command_end"] = build(CommandEnd, data.get("command_end"))
        return cls(**plain)
