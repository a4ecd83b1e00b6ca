"""The exporter's catalogue: every metric family, declared once, with its help and labels.

Collecting (render.py) and docs/metrics.md (markdown_table) both read SPECS, so a new family
is one row in one table here. Names never change: tests/unit/test_metric_names.py pins them.
"""

from __future__ import annotations

from dataclasses import dataclass

from diskinfo.units import MIB
from diskinfo.units import SECTOR_BYTES as SECTOR


@dataclass(frozen=True)
class Spec:
    """One exported metric family: name as exposed (counters end in `_total`)."""

    name: str
    kind: str  # "counter" | "gauge"
    help: str
    labels: tuple[str, ...] = ()
    group: str = ""


SPECS: dict[str, Spec] = {}


def _spec(name: str, kind: str, help: str, labels: tuple[str, ...] = (), group: str = "") -> str:
    family = name.removesuffix("_total")  # a counter's family name must not be a gauge's
    assert all(family != n.removesuffix("_total") for n in SPECS), name
    assert (kind == "counter") == name.endswith("_total"), name
    SPECS[name] = Spec(name, kind, help, labels, group)
    return name


def _register(
    table: dict[str, tuple[str, float, str]],
    kind: str,
    suffix: str,
    labels: tuple[str, ...] = (),
    group: str = "",
) -> None:
    """Declare every row of a key -> (name, factor, help) table, help ending in `suffix`."""
    for name, _factor, help in table.values():
        _spec(name, kind, f"{help}{suffix}", labels, group)


DEV = ("device",)
GPU = ("gpu", "name")
NFS = ("mount", "server")

# --- monitor ---
_spec("diskinfo_build_info", "gauge", "Always 1; the diskinfo version", ("version",), "monitor")
_spec(
    "diskinfo_last_record_timestamp_seconds",
    "gauge",
    "Unix time at the end of the latest interval",
    group="monitor",
)
_spec(
    "diskinfo_interval_seconds",
    "gauge",
    "Measured length of the latest interval (the divisor of its rates)",
    group="monitor",
)
_spec("diskinfo_records_total", "counter", "Intervals measured since start", group="monitor")
_spec(
    "diskinfo_record_warnings",
    "gauge",
    "Warnings raised while measuring the latest interval (text in diskinfo.log)",
    group="monitor",
)
_spec(
    "diskinfo_watched_path_info",
    "gauge",
    "Always 1: a watched path and the block device it lives on",
    ("path", "device"),
    "monitor",
)

# --- disks: raw counters (DeviceFigures.counters: /proc/diskstats fields, kernel units) ---
# key -> (metric name, factor to base units, help)
DISK_COUNTERS: dict[str, tuple[str, float, str]] = {
    "rd_ios": ("diskinfo_disk_reads_completed_total", 1, "Reads completed"),
    "rd_merges": ("diskinfo_disk_reads_merged_total", 1, "Adjacent reads merged"),
    "rd_sectors": ("diskinfo_disk_read_bytes_total", SECTOR, "Bytes read"),
    "rd_ticks": ("diskinfo_disk_read_time_seconds_total", 1e-3, "Time spent on reads"),
    "wr_ios": ("diskinfo_disk_writes_completed_total", 1, "Writes completed"),
    "wr_merges": ("diskinfo_disk_writes_merged_total", 1, "Adjacent writes merged"),
    "wr_sectors": ("diskinfo_disk_written_bytes_total", SECTOR, "Bytes written"),
    "wr_ticks": ("diskinfo_disk_write_time_seconds_total", 1e-3, "Time spent on writes"),
    "io_ticks": (
        "diskinfo_disk_io_time_seconds_total",
        1e-3,
        "Time with at least one request in flight (rate = %util / 100)",
    ),
    "rq_ticks": (
        "diskinfo_disk_io_time_weighted_seconds_total",
        1e-3,
        "Request time weighted by requests in flight (rate = aqu-sz)",
    ),
    "dc_ios": ("diskinfo_disk_discards_completed_total", 1, "Discards completed"),
    "dc_merges": ("diskinfo_disk_discards_merged_total", 1, "Adjacent discards merged"),
    "dc_sectors": ("diskinfo_disk_discarded_bytes_total", SECTOR, "Bytes discarded"),
    "dc_ticks": (
        "diskinfo_disk_discard_time_seconds_total",
        1e-3,
        "Time spent on discards",
    ),
    "fl_ios": ("diskinfo_disk_flush_requests_total", 1, "Flush requests completed"),
    "fl_ticks": (
        "diskinfo_disk_flush_requests_time_seconds_total",
        1e-3,
        "Time spent on flush requests",
    ),
}
_register(DISK_COUNTERS, "counter", ", cumulative (from /proc/diskstats)", DEV, "disk counters")
_spec(
    "diskinfo_disk_io_now",
    "gauge",
    "Requests in flight at the end of the latest interval",
    DEV,
    "disk counters",
)

# --- disks: diskinfo's own figures for the latest interval (DeviceFigures attributes) ---
# attribute -> (metric name, factor to base units, help)
DISK_GAUGES: dict[str, tuple[str, float, str]] = {
    "r_s": ("diskinfo_disk_reads_per_second", 1, "Reads completed per second (r/s)"),
    "w_s": ("diskinfo_disk_writes_per_second", 1, "Writes completed per second (w/s)"),
    "rmb_s": ("diskinfo_disk_read_bytes_per_second", MIB, "Bytes read per second (rMB/s)"),
    "wmb_s": ("diskinfo_disk_written_bytes_per_second", MIB, "Bytes written per second (wMB/s)"),
    "rrqm_s": ("diskinfo_disk_read_merges_per_second", 1, "Reads merged per second (rrqm/s)"),
    "wrqm_s": ("diskinfo_disk_write_merges_per_second", 1, "Writes merged per second (wrqm/s)"),
    "r_await": ("diskinfo_disk_read_await_seconds", 1e-3, "Mean time per read (r_await)"),
    "w_await": ("diskinfo_disk_write_await_seconds", 1e-3, "Mean time per write (w_await)"),
    "aqu_sz": ("diskinfo_disk_queue_length", 1, "Mean requests in flight (aqu-sz)"),
    "rareq_sz": (
        "diskinfo_disk_read_request_size_bytes",
        1024,
        "Mean read request size (rareq-sz)",
    ),
    "wareq_sz": (
        "diskinfo_disk_write_request_size_bytes",
        1024,
        "Mean write request size (wareq-sz)",
    ),
    "util": ("diskinfo_disk_utilization_ratio", 0.01, "Share of time busy, 0..1 (%util / 100)"),
    "d_s": ("diskinfo_disk_discards_per_second", 1, "Discards per second (d/s)"),
    "dmb_s": ("diskinfo_disk_discarded_bytes_per_second", MIB, "Bytes discarded per second"),
    "d_await": ("diskinfo_disk_discard_await_seconds", 1e-3, "Mean time per discard"),
    "f_s": ("diskinfo_disk_flushes_per_second", 1, "Flush requests per second (f/s)"),
    "f_await": ("diskinfo_disk_flush_await_seconds", 1e-3, "Mean time per flush request"),
}
_register(DISK_GAUGES, "gauge", ", latest interval", DEV, "disk interval figures")

# --- NFS per mount: raw counters (keys of NfsFigures.counters) and interval figures ---
NFS_COUNTERS: dict[str, tuple[str, float, str]] = {
    "read_bytes": ("diskinfo_nfs_read_bytes_total", 1, "Bytes read"),
    "write_bytes": ("diskinfo_nfs_written_bytes_total", 1, "Bytes written"),
    "read_ops": ("diskinfo_nfs_read_operations_total", 1, "READ operations"),
    "write_ops": ("diskinfo_nfs_write_operations_total", 1, "WRITE operations"),
    "read_rtt_ms": ("diskinfo_nfs_read_rtt_seconds_total", 1e-3, "Round-trip time of READs"),
    "write_rtt_ms": ("diskinfo_nfs_write_rtt_seconds_total", 1e-3, "Round-trip time of WRITEs"),
    "read_exe_ms": (
        "diskinfo_nfs_read_execute_seconds_total",
        1e-3,
        "Time from READ submission to completion",
    ),
    "write_exe_ms": (
        "diskinfo_nfs_write_execute_seconds_total",
        1e-3,
        "Time from WRITE submission to completion",
    ),
    "retrans": ("diskinfo_nfs_retransmissions_total", 1, "READ and WRITE retransmissions"),
}
_register(NFS_COUNTERS, "counter", ", cumulative (from mountstats)", NFS, "NFS")
NFS_GAUGES: dict[str, tuple[str, float, str]] = {
    "read_bytes_s": ("diskinfo_nfs_read_bytes_per_second", 1, "Bytes read per second"),
    "write_bytes_s": ("diskinfo_nfs_written_bytes_per_second", 1, "Bytes written per second"),
    "read_ops_s": ("diskinfo_nfs_read_operations_per_second", 1, "READs per second"),
    "write_ops_s": ("diskinfo_nfs_write_operations_per_second", 1, "WRITEs per second"),
    "read_rtt_ms": ("diskinfo_nfs_read_rtt_mean_seconds", 1e-3, "Mean READ round-trip time"),
    "write_rtt_ms": ("diskinfo_nfs_write_rtt_mean_seconds", 1e-3, "Mean WRITE round-trip time"),
    "read_exe_ms": ("diskinfo_nfs_read_execute_mean_seconds", 1e-3, "Mean READ execute time"),
    "write_exe_ms": ("diskinfo_nfs_write_execute_mean_seconds", 1e-3, "Mean WRITE execute time"),
    "retrans": ("diskinfo_nfs_interval_retransmissions", 1, "Retransmissions"),
}
_register(NFS_GAUGES, "gauge", ", latest interval", NFS, "NFS")

# --- the monitor's own cgroup (the container's) per watched device (CgroupIO) ---
CGROUP_COUNTERS: dict[str, tuple[str, float, str]] = {
    "read_bytes": ("diskinfo_cgroup_read_bytes_total", 1, "Bytes this cgroup read"),
    "write_bytes": ("diskinfo_cgroup_written_bytes_total", 1, "Bytes this cgroup wrote"),
    "read_ios": ("diskinfo_cgroup_read_ios_total", 1, "Read I/Os this cgroup issued"),
    "write_ios": ("diskinfo_cgroup_write_ios_total", 1, "Write I/Os this cgroup issued"),
    "discard_bytes": ("diskinfo_cgroup_discarded_bytes_total", 1, "Bytes this cgroup discarded"),
    "discard_ios": ("diskinfo_cgroup_discard_ios_total", 1, "Discard I/Os this cgroup issued"),
}
_register(CGROUP_COUNTERS, "counter", ", cumulative (cgroup io.stat / blkio)", DEV, "cgroup")
CGROUP_GAUGES: dict[str, tuple[str, float, str]] = {
    "read_bytes_s": ("diskinfo_cgroup_read_bytes_per_second", 1, "Bytes read per second"),
    "write_bytes_s": ("diskinfo_cgroup_written_bytes_per_second", 1, "Bytes written per second"),
    "read_ios_s": ("diskinfo_cgroup_read_ios_per_second", 1, "Read I/Os per second"),
    "write_ios_s": ("diskinfo_cgroup_write_ios_per_second", 1, "Write I/Os per second"),
    "read_bps": (
        "diskinfo_cgroup_read_limit_bytes_per_second",
        1,
        "Read bandwidth limit (absent: none)",
    ),
    "write_bps": (
        "diskinfo_cgroup_write_limit_bytes_per_second",
        1,
        "Write bandwidth limit (absent: none)",
    ),
    "read_iops": ("diskinfo_cgroup_read_limit_iops", 1, "Read IOPS limit (absent: none)"),
    "write_iops": ("diskinfo_cgroup_write_limit_iops", 1, "Write IOPS limit (absent: none)"),
    "throttled": (
        "diskinfo_cgroup_throttled",
        1,
        "1 when a rate is at >= 90% of its cgroup limit, else 0",
    ),
    "pressure_some_avg10": (
        "diskinfo_cgroup_io_pressure_some_ratio",
        0.01,
        "Share of time some of the cgroup's tasks stalled on I/O (PSI avg10), 0..1",
    ),
    "pressure_full_avg10": (
        "diskinfo_cgroup_io_pressure_full_ratio",
        0.01,
        "Share of time all of the cgroup's tasks stalled on I/O (PSI avg10), 0..1",
    ),
}
_register(CGROUP_GAUGES, "gauge", ", this cgroup, latest interval", DEV, "cgroup")

# --- GPUs (GpuFigures attributes) ---
_spec("diskinfo_gpus", "gauge", "GPUs seen through NVML (0: no GPU or no NVML)", group="GPU")
GPU_GAUGES: dict[str, tuple[str, float, str]] = {
    "util_mean": ("diskinfo_gpu_utilization_ratio", 0.01, "Mean GPU utilisation, 0..1"),
    "util_min": ("diskinfo_gpu_utilization_min_ratio", 0.01, "Lowest GPU utilisation sample"),
    "util_max": ("diskinfo_gpu_utilization_max_ratio", 0.01, "Highest GPU utilisation sample"),
    "idle_fraction": ("diskinfo_gpu_idle_ratio", 1, "Share of samples with the GPU idle"),
    "pulsing": ("diskinfo_gpu_pulsing_ratio", 1, "Busy/idle alternation, 0..1 (high: bursts)"),
    "mem_used_mb": ("diskinfo_gpu_memory_used_bytes", MIB, "GPU memory used"),
    "mem_total_mb": ("diskinfo_gpu_memory_total_bytes", MIB, "GPU memory installed"),
    "pcie_rx_mb_s": ("diskinfo_gpu_pcie_rx_bytes_per_second", MIB, "PCIe bytes to the GPU"),
    "pcie_tx_mb_s": ("diskinfo_gpu_pcie_tx_bytes_per_second", MIB, "PCIe bytes from the GPU"),
    "power_w": ("diskinfo_gpu_power_watts", 1, "Mean power draw"),
    "samples": ("diskinfo_gpu_samples", 1, "NVML samples taken"),
    "training": ("diskinfo_gpu_training", 1, "1: the training uses it, 0: unused, not judged"),
}
_register(GPU_GAUGES, "gauge", ", latest interval", GPU, "GPU")

# --- host (HostFigures attributes) ---
HOST_GAUGES: dict[str, tuple[str, float, str]] = {
    "cpu_busy": ("diskinfo_host_cpu_busy_ratio", 0.01, "CPU busy share of all cores, 0..1"),
    "cpu_iowait": ("diskinfo_host_cpu_iowait_ratio", 0.01, "CPU iowait share, 0..1"),
    "cpu_count": ("diskinfo_host_cpus", 1, "CPU cores"),
    "page_cache_mb": ("diskinfo_host_page_cache_bytes", MIB, "Page cache size"),
    "mem_total_mb": ("diskinfo_host_memory_total_bytes", MIB, "Memory installed"),
    "mem_available_mb": ("diskinfo_host_memory_available_bytes", MIB, "Memory available"),
    "dataset_mb": ("diskinfo_dataset_bytes", MIB, "Size of the watched data paths"),
    "shm_total_mb": ("diskinfo_host_shm_total_bytes", MIB, "Size of /dev/shm"),
}
_register(HOST_GAUGES, "gauge", ", latest interval", (), "host")
_spec(
    "diskinfo_process_read_bytes_per_second",
    "gauge",
    "Bytes read per second by the training command's processes, summed by role",
    ("role",),
    "host",
)

# --- training loop (LoaderFigures), counters accumulated by the exporter since its start ---
_spec(
    "diskinfo_loader_data_wait_ratio",
    "gauge",
    "Share of step time spent waiting for the next batch, 0..1, latest interval",
    group="training loop",
)
_spec(
    "diskinfo_loader_batches_per_second",
    "gauge",
    "Batches per second, latest interval",
    group="training loop",
)
LOADER_COUNTERS: dict[str, tuple[str, float, str]] = {
    "batches": ("diskinfo_loader_batches_total", 1, "Batches delivered"),
    "wait_s": ("diskinfo_loader_wait_seconds_total", 1, "Time waiting for the next batch"),
    "step_s": ("diskinfo_loader_step_seconds_total", 1, "Time in the training step"),
    "worker_errors": ("diskinfo_loader_worker_errors_total", 1, "DataLoader worker deaths"),
}
_register(LOADER_COUNTERS, "counter", ", since the monitor started", (), "training loop")

# --- the ranks of a distributed job on this node: the job id only on the info metric, so a
# new job adds one series per rank there, not a label on every figure (docs/cluster.md) ---
RANK = ("rank",)
_spec(
    "diskinfo_rank_info",
    "gauge",
    "Always 1; a rank of a distributed job on this node, latest interval: its job and node",
    ("rank", "training_job", "node", "world_size"),
    "job",
)
_spec(
    "diskinfo_rank_data_wait_ratio",
    "gauge",
    "Share of the rank's step time spent waiting for the next batch, 0..1, latest interval",
    RANK,
    "job",
)
_spec(
    "diskinfo_rank_batches_per_second",
    "gauge",
    "The rank's batches per second, latest interval",
    RANK,
    "job",
)

# --- verdict and node pressure ---
_spec(
    "diskinfo_verdict",
    "gauge",
    "1 for the latest interval's verdict, 0 for the others",
    ("verdict",),
    "verdict",
)
_spec(
    "diskinfo_verdict_seconds_total",
    "counter",
    "Time spent under each verdict since the monitor started",
    ("verdict",),
    "verdict",
)
_spec(
    "diskinfo_verdict_fix_info",
    "gauge",
    "Always 1; the id of the first fix the latest interval's verdict names (absent: none)",
    ("verdict", "fix"),
    "verdict",
)
_spec(
    "diskinfo_node_pressure",
    "gauge",
    "1 for the node's storage pressure (ok, busy, saturated, unknown), 0 for the others",
    ("state",),
    "verdict",
)


def markdown_table() -> str:
    """The metrics table of docs/metrics.md, rendered from SPECS (a test keeps them equal)."""
    lines = []
    group = None
    for spec in SPECS.values():
        if spec.group != group:
            group = spec.group
            lines += ["", f"### {group}", "", "| metric | type | labels | help |"]
            lines.append("|---|---|---|---|")
        labels = ", ".join(f"`{label}`" for label in spec.labels)
        lines.append(f"| `{spec.name}` | {spec.kind} | {labels} | {spec.help} |")
    return "\n".join(lines).strip() + "\n"
