"""Prometheus exporter: /metrics and /status served from the latest interval record.

A custom collector renders the latest record at scrape time instead of keeping global
metric objects: the record is the single source, and a device that disappears simply stops
being exported. Raw cumulative counters (from /proc/diskstats and mountstats) let Prometheus
compute rates over any window; gauges carry diskinfo's own figures for the last interval.
Every metric is declared once in SPECS, which also renders docs/metrics.md.
"""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from diskinfo import __version__, diagnose
from diskinfo.errors import UserError
from diskinfo.pressure import STATES, node_pressure, redact, status_document
from diskinfo.record import IntervalRecord

DEFAULT_PORT = 9101
MIB = 2**20
SECTOR = 512  # /proc/diskstats sectors are 512 bytes whatever the device's block size


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
for _name, _f, _help in DISK_COUNTERS.values():
    _spec(_name, "counter", f"{_help}, cumulative (from /proc/diskstats)", DEV, "disk counters")
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
for _name, _f, _help in DISK_GAUGES.values():
    _spec(_name, "gauge", f"{_help}, latest interval", DEV, "disk interval figures")

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
for _name, _f, _help in NFS_COUNTERS.values():
    _spec(_name, "counter", f"{_help}, cumulative (from mountstats)", NFS, "NFS")
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
for _name, _f, _help in NFS_GAUGES.values():
    _spec(_name, "gauge", f"{_help}, latest interval", NFS, "NFS")

# --- the monitor's own cgroup (the container's) per watched device (CgroupIO) ---
CGROUP_COUNTERS: dict[str, tuple[str, float, str]] = {
    "read_bytes": ("diskinfo_cgroup_read_bytes_total", 1, "Bytes this cgroup read"),
    "write_bytes": ("diskinfo_cgroup_written_bytes_total", 1, "Bytes this cgroup wrote"),
    "read_ios": ("diskinfo_cgroup_read_ios_total", 1, "Read I/Os this cgroup issued"),
    "write_ios": ("diskinfo_cgroup_write_ios_total", 1, "Write I/Os this cgroup issued"),
    "discard_bytes": ("diskinfo_cgroup_discarded_bytes_total", 1, "Bytes this cgroup discarded"),
    "discard_ios": ("diskinfo_cgroup_discard_ios_total", 1, "Discard I/Os this cgroup issued"),
}
for _name, _f, _help in CGROUP_COUNTERS.values():
    _spec(_name, "counter", f"{_help}, cumulative (cgroup io.stat / blkio)", DEV, "cgroup")
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
for _name, _f, _help in CGROUP_GAUGES.values():
    _spec(_name, "gauge", f"{_help}, this cgroup, latest interval", DEV, "cgroup")

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
}
for _name, _f, _help in GPU_GAUGES.values():
    _spec(_name, "gauge", f"{_help}, latest interval", GPU, "GPU")

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
for _name, _f, _help in HOST_GAUGES.values():
    _spec(_name, "gauge", f"{_help}, latest interval", group="host")
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
LOADER_COUNTERS: dict[str, tuple[str, str]] = {
    "batches": ("diskinfo_loader_batches_total", "Batches delivered"),
    "wait_s": ("diskinfo_loader_wait_seconds_total", "Time waiting for the next batch"),
    "step_s": ("diskinfo_loader_step_seconds_total", "Time in the training step"),
    "worker_errors": ("diskinfo_loader_worker_errors_total", "DataLoader worker deaths"),
}
for _name, _help in LOADER_COUNTERS.values():
    _spec(_name, "counter", f"{_help}, since the monitor started", group="training loop")

# --- verdict and node pressure ---
VERDICTS = (
    diagnose.INPUT_DISK,
    diagnose.INPUT_CPU,
    diagnose.INPUT_SMALL_FILES,
    diagnose.COMPUTE_BOUND,
    diagnose.IDLE,
    diagnose.UNKNOWN,
)
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
    "diskinfo_node_pressure",
    "gauge",
    "1 for the node's storage pressure (ok, busy, saturated, unknown), 0 for the others",
    ("state",),
    "verdict",
)


@dataclass
class _Totals:
    """What the exporter accumulates itself from per-interval figures."""

    records: int = 0
    loader: dict[str, float] | None = None
    verdict_s: dict[str, float] = field(default_factory=dict)

    def add(self, record: IntervalRecord) -> None:
        self.records += 1
        if record.loader is not None:
            if self.loader is None:
                self.loader = dict.fromkeys(LOADER_COUNTERS, 0.0)
            for key in LOADER_COUNTERS:
                self.loader[key] += max(0.0, float(getattr(record.loader, key) or 0))
        if record.verdict is not None:
            name = record.verdict.verdict
            self.verdict_s[name] = self.verdict_s.get(name, 0.0) + record.elapsed_s


def _family(name: str) -> Metric:
    spec = SPECS[name]
    if spec.kind == "counter":
        return CounterMetricFamily(name, spec.help, labels=spec.labels)
    return GaugeMetricFamily(name, spec.help, labels=spec.labels)


def _figures(
    table: dict[str, tuple[str, float, str]],
    items: Iterable[tuple[list[str], Any]],
    values: Callable[[Any], dict[str, Any] | None],
) -> Iterator[Metric]:
    """One family per table row over several labelled objects; None values are left out
    (a figure the kernel does not have is absent, not zero)."""
    families: dict[str, Metric] = {}
    for labels, obj in items:
        got = values(obj)
        if not got:
            continue
        for key, (name, factor, _help) in table.items():
            value = got.get(key)
            if value is None:
                continue
            if name not in families:
                families[name] = _family(name)
            families[name].add_metric(labels, float(value) * factor)
    yield from families.values()


class RecordCollector:
    """Renders the latest record at scrape time (prometheus_client custom collector)."""

    def __init__(self, snapshot: Callable[[], tuple[IntervalRecord | None, _Totals]]) -> None:
        self._snapshot = snapshot

    def describe(self) -> list[Metric]:
        return []  # families depend on the record; don't let the registry collect at register

    def collect(self) -> Iterator[Metric]:
        record, totals = self._snapshot()
        fam = _family("diskinfo_build_info")
        fam.add_metric([__version__], 1)
        yield fam
        fam = _family("diskinfo_records_total")
        fam.add_metric([], totals.records)
        yield fam
        fam = _family("diskinfo_node_pressure")
        state = node_pressure(record, time.time()).state
        for name in STATES:
            fam.add_metric([name], 1.0 if name == state else 0.0)
        yield fam
        if totals.loader is not None:
            for key, (name, _help) in LOADER_COUNTERS.items():
                fam = _family(name)
                fam.add_metric([], totals.loader[key])
                yield fam
        if totals.verdict_s:
            fam = _family("diskinfo_verdict_seconds_total")
            for name in sorted(set(VERDICTS) | set(totals.verdict_s)):
                fam.add_metric([name], totals.verdict_s.get(name, 0.0))
            yield fam
        if record is None:
            return
        yield from self._record(record)

    def _record(self, record: IntervalRecord) -> Iterator[Metric]:
        for name, value in (
            ("diskinfo_last_record_timestamp_seconds", record.ts),
            ("diskinfo_interval_seconds", record.elapsed_s),
            ("diskinfo_record_warnings", len(record.warnings)),
            ("diskinfo_gpus", len(record.gpus or [])),
        ):
            fam = _family(name)
            fam.add_metric([], value)
            yield fam
        fam = _family("diskinfo_watched_path_info")
        for dev in record.devices:
            for path in dev.paths:
                fam.add_metric([path, dev.device], 1)
        yield fam

        devices = [([d.device], d) for d in record.devices]
        yield from _figures(DISK_COUNTERS, devices, lambda d: d.counters)
        fam = _family("diskinfo_disk_io_now")
        for dev in record.devices:
            fam.add_metric([dev.device], dev.in_flight)
        yield fam
        yield from _figures(DISK_GAUGES, devices, vars)

        mounts = [([n.mount, redact(n.server)], n) for n in record.nfs]
        yield from _figures(NFS_COUNTERS, mounts, lambda n: n.counters)
        yield from _figures(NFS_GAUGES, mounts, vars)

        groups = [([c.device], c) for c in record.cgroup_io]
        yield from _figures(CGROUP_COUNTERS, groups, lambda c: c.counters)
        yield from _figures(CGROUP_GAUGES, groups, vars)

        gpus = [([str(g.index), g.name], g) for g in record.gpus or []]
        yield from _figures(GPU_GAUGES, gpus, vars)
        if record.cpu is not None:
            yield from _figures(HOST_GAUGES, [([], record.cpu)], vars)
        if record.procs:
            fam = _family("diskinfo_process_read_bytes_per_second")
            by_role: dict[str, float] = {}
            for proc in record.procs:
                role = proc.role or "other"
                by_role[role] = by_role.get(role, 0.0) + proc.read_mb_s * MIB
            for role, value in sorted(by_role.items()):
                fam.add_metric([role], value)
            yield fam
        if record.loader is not None:
            for name, value in (
                ("diskinfo_loader_data_wait_ratio", record.loader.wait_share),
                ("diskinfo_loader_batches_per_second", record.loader.batches_s),
            ):
                fam = _family(name)
                fam.add_metric([], value)
                yield fam
        if record.verdict is not None:
            fam = _family("diskinfo_verdict")
            current = record.verdict.verdict
            for name in sorted(set(VERDICTS) | {current}):
                fam.add_metric([name], 1.0 if name == current else 0.0)
            yield fam


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds would flood the monitor's log."""


class _Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self) -> None:
        # skip HTTPServer's getfqdn(): a reverse DNS lookup can hang where DNS is unreachable
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]
        self.setup_environ()


class _Server6(_Server):
    address_family = socket.AF_INET6


_INDEX = b"diskinfo exporter: /metrics (Prometheus), /status (node storage pressure, JSON)\n"


class PrometheusSink:
    """Monitor sink that keeps the latest record and serves it over HTTP in its own thread.

    port 0 binds an ephemeral port (tests; read `.port`); the CLI treats 0 as "off".
    """

    def __init__(self, port: int = DEFAULT_PORT, addr: str = "127.0.0.1") -> None:
        if not 0 <= port <= 65535:
            raise UserError(f"metrics port must be 0..65535, got {port}")
        self._lock = threading.Lock()
        self._latest: IntervalRecord | None = None
        self._totals = _Totals()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(RecordCollector(self._snapshot))
        ProcessCollector(registry=self.registry)  # the monitor's own CPU and memory
        self._metrics_app = make_wsgi_app(self.registry)
        server_class = _Server6 if ":" in addr else _Server
        try:
            self._server = make_server(
                addr, port, self._app, server_class=server_class, handler_class=_QuietHandler
            )
        except OSError as exc:
            raise UserError(
                f"cannot serve metrics on {addr}:{port}: {exc.strerror or exc}", exit_code=1
            ) from None
        self.addr = addr
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="diskinfo-metrics", daemon=True
        )
        self._thread.start()

    def _snapshot(self) -> tuple[IntervalRecord | None, _Totals]:
        with self._lock:
            totals = _Totals(
                self._totals.records,
                dict(self._totals.loader) if self._totals.loader is not None else None,
                dict(self._totals.verdict_s),
            )
            return self._latest, totals

    def status(self) -> dict[str, Any]:
        with self._lock:
            record = self._latest
        return status_document(record, time.time())

    def write(self, record: IntervalRecord) -> None:
        with self._lock:
            self._latest = record
            self._totals.add(record)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _app(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        path = environ.get("PATH_INFO", "/")
        if environ.get("REQUEST_METHOD", "GET") not in ("GET", "HEAD"):
            start_response("405 Method Not Allowed", [("Allow", "GET, HEAD")])
            return [b"only GET\n"]
        if path == "/metrics":
            return self._metrics_app(environ, start_response)
        if path == "/status":
            body = (json.dumps(self.status(), indent=2) + "\n").encode()
            start_response(
                "200 OK",
                [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
            )
            return [body]
        if path == "/":
            start_response("200 OK", [("Content-Type", "text/plain; charset=utf-8")])
            return [_INDEX]
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [b"not found: try /metrics or /status\n"]


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


if __name__ == "__main__":  # python -m diskinfo.sinks.prometheus > table for docs/metrics.md
    print(markdown_table(), end="")
