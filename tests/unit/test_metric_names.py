"""The exporter's metric names are a surface users build dashboards and alerts on: pinned.

The list below is the full set as released (kind and labels too). A name may be added (append
it here in the same change); none may change or go. Also pinned: what other modules and users
import from `diskinfo.sinks.prometheus`, and that `diskinfo status` does not load the exporter.
"""

from __future__ import annotations

import subprocess
import sys

import diskinfo.sinks.prometheus as prometheus
from diskinfo.sinks.prometheus import SPECS

PINNED = [  # (name, kind, labels)
    ("diskinfo_build_info", "gauge", "version"),
    ("diskinfo_last_record_timestamp_seconds", "gauge", ""),
    ("diskinfo_interval_seconds", "gauge", ""),
    ("diskinfo_records_total", "counter", ""),
    ("diskinfo_record_warnings", "gauge", ""),
    ("diskinfo_watched_path_info", "gauge", "path,device"),
    ("diskinfo_disk_reads_completed_total", "counter", "device"),
    ("diskinfo_disk_reads_merged_total", "counter", "device"),
    ("diskinfo_disk_read_bytes_total", "counter", "device"),
    ("diskinfo_disk_read_time_seconds_total", "counter", "device"),
    ("diskinfo_disk_writes_completed_total", "counter", "device"),
    ("diskinfo_disk_writes_merged_total", "counter", "device"),
    ("diskinfo_disk_written_bytes_total", "counter", "device"),
    ("diskinfo_disk_write_time_seconds_total", "counter", "device"),
    ("diskinfo_disk_io_time_seconds_total", "counter", "device"),
    ("diskinfo_disk_io_time_weighted_seconds_total", "counter", "device"),
    ("diskinfo_disk_discards_completed_total", "counter", "device"),
    ("diskinfo_disk_discards_merged_total", "counter", "device"),
    ("diskinfo_disk_discarded_bytes_total", "counter", "device"),
    ("diskinfo_disk_discard_time_seconds_total", "counter", "device"),
    ("diskinfo_disk_flush_requests_total", "counter", "device"),
    ("diskinfo_disk_flush_requests_time_seconds_total", "counter", "device"),
    ("diskinfo_disk_io_now", "gauge", "device"),
    ("diskinfo_disk_reads_per_second", "gauge", "device"),
    ("diskinfo_disk_writes_per_second", "gauge", "device"),
    ("diskinfo_disk_read_bytes_per_second", "gauge", "device"),
    ("diskinfo_disk_written_bytes_per_second", "gauge", "device"),
    ("diskinfo_disk_read_merges_per_second", "gauge", "device"),
    ("diskinfo_disk_write_merges_per_second", "gauge", "device"),
    ("diskinfo_disk_read_await_seconds", "gauge", "device"),
    ("diskinfo_disk_write_await_seconds", "gauge", "device"),
    ("diskinfo_disk_queue_length", "gauge", "device"),
    ("diskinfo_disk_read_request_size_bytes", "gauge", "device"),
    ("diskinfo_disk_write_request_size_bytes", "gauge", "device"),
    ("diskinfo_disk_utilization_ratio", "gauge", "device"),
    ("diskinfo_disk_discards_per_second", "gauge", "device"),
    ("diskinfo_disk_discarded_bytes_per_second", "gauge", "device"),
    ("diskinfo_disk_discard_await_seconds", "gauge", "device"),
    ("diskinfo_disk_flushes_per_second", "gauge", "device"),
    ("diskinfo_disk_flush_await_seconds", "gauge", "device"),
    ("diskinfo_nfs_read_bytes_total", "counter", "mount,server"),
    ("diskinfo_nfs_written_bytes_total", "counter", "mount,server"),
    ("diskinfo_nfs_read_operations_total", "counter", "mount,server"),
    ("diskinfo_nfs_write_operations_total", "counter", "mount,server"),
    ("diskinfo_nfs_read_rtt_seconds_total", "counter", "mount,server"),
    ("diskinfo_nfs_write_rtt_seconds_total", "counter", "mount,server"),
    ("diskinfo_nfs_read_execute_seconds_total", "counter", "mount,server"),
    ("diskinfo_nfs_write_execute_seconds_total", "counter", "mount,server"),
    ("diskinfo_nfs_retransmissions_total", "counter", "mount,server"),
    ("diskinfo_nfs_read_bytes_per_second", "gauge", "mount,server"),
    ("diskinfo_nfs_written_bytes_per_second", "gauge", "mount,server"),
    ("diskinfo_nfs_read_operations_per_second", "gauge", "mount,server"),
    ("diskinfo_nfs_write_operations_per_second", "gauge", "mount,server"),
    ("diskinfo_nfs_read_rtt_mean_seconds", "gauge", "mount,server"),
    ("diskinfo_nfs_write_rtt_mean_seconds", "gauge", "mount,server"),
    ("diskinfo_nfs_read_execute_mean_seconds", "gauge", "mount,server"),
    ("diskinfo_nfs_write_execute_mean_seconds", "gauge", "mount,server"),
    ("diskinfo_nfs_interval_retransmissions", "gauge", "mount,server"),
    ("diskinfo_cgroup_read_bytes_total", "counter", "device"),
    ("diskinfo_cgroup_written_bytes_total", "counter", "device"),
    ("diskinfo_cgroup_read_ios_total", "counter", "device"),
    ("diskinfo_cgroup_write_ios_total", "counter", "device"),
    ("diskinfo_cgroup_discarded_bytes_total", "counter", "device"),
    ("diskinfo_cgroup_discard_ios_total", "counter", "device"),
    ("diskinfo_cgroup_read_bytes_per_second", "gauge", "device"),
    ("diskinfo_cgroup_written_bytes_per_second", "gauge", "device"),
    ("diskinfo_cgroup_read_ios_per_second", "gauge", "device"),
    ("diskinfo_cgroup_write_ios_per_second", "gauge", "device"),
    ("diskinfo_cgroup_read_limit_bytes_per_second", "gauge", "device"),
    ("diskinfo_cgroup_write_limit_bytes_per_second", "gauge", "device"),
    ("diskinfo_cgroup_read_limit_iops", "gauge", "device"),
    ("diskinfo_cgroup_write_limit_iops", "gauge", "device"),
    ("diskinfo_cgroup_throttled", "gauge", "device"),
    ("diskinfo_cgroup_io_pressure_some_ratio", "gauge", "device"),
    ("diskinfo_cgroup_io_pressure_full_ratio", "gauge", "device"),
    ("diskinfo_gpus", "gauge", ""),
    ("diskinfo_gpu_utilization_ratio", "gauge", "gpu,name"),
    ("diskinfo_gpu_utilization_min_ratio", "gauge", "gpu,name"),
    ("diskinfo_gpu_utilization_max_ratio", "gauge", "gpu,name"),
    ("diskinfo_gpu_idle_ratio", "gauge", "gpu,name"),
    ("diskinfo_gpu_pulsing_ratio", "gauge", "gpu,name"),
    ("diskinfo_gpu_memory_used_bytes", "gauge", "gpu,name"),
    ("diskinfo_gpu_memory_total_bytes", "gauge", "gpu,name"),
    ("diskinfo_gpu_pcie_rx_bytes_per_second", "gauge", "gpu,name"),
    ("diskinfo_gpu_pcie_tx_bytes_per_second", "gauge", "gpu,name"),
    ("diskinfo_gpu_power_watts", "gauge", "gpu,name"),
    ("diskinfo_gpu_samples", "gauge", "gpu,name"),
    ("diskinfo_gpu_training", "gauge", "gpu,name"),
    ("diskinfo_host_cpu_busy_ratio", "gauge", ""),
    ("diskinfo_host_cpu_iowait_ratio", "gauge", ""),
    ("diskinfo_host_cpus", "gauge", ""),
    ("diskinfo_host_page_cache_bytes", "gauge", ""),
    ("diskinfo_host_memory_total_bytes", "gauge", ""),
    ("diskinfo_host_memory_available_bytes", "gauge", ""),
    ("diskinfo_dataset_bytes", "gauge", ""),
    ("diskinfo_host_shm_total_bytes", "gauge", ""),
    ("diskinfo_process_read_bytes_per_second", "gauge", "role"),
    ("diskinfo_loader_data_wait_ratio", "gauge", ""),
    ("diskinfo_loader_batches_per_second", "gauge", ""),
    ("diskinfo_rank_info", "gauge", "rank,training_job,node,world_size"),
    ("diskinfo_rank_data_wait_ratio", "gauge", "rank"),
    ("diskinfo_rank_batches_per_second", "gauge", "rank"),
    ("diskinfo_loader_batches_total", "counter", ""),
    ("diskinfo_loader_wait_seconds_total", "counter", ""),
    ("diskinfo_loader_step_seconds_total", "counter", ""),
    ("diskinfo_loader_worker_errors_total", "counter", ""),
    ("diskinfo_verdict", "gauge", "verdict"),
    ("diskinfo_verdict_seconds_total", "counter", "verdict"),
    ("diskinfo_verdict_fix_info", "gauge", "verdict,fix"),
    ("diskinfo_node_pressure", "gauge", "state"),
]


def test_metric_names_kinds_and_labels_are_the_pinned_ones():
    declared = [(s.name, s.kind, ",".join(s.labels)) for s in SPECS.values()]
    missing = sorted(set(PINNED) - set(declared))
    assert not missing, f"metrics renamed or gone (users' queries break): {missing}"
    added = sorted(set(declared) - set(PINNED))
    assert not added, f"new metrics: add them to PINNED in this file: {added}"
    assert len(declared) == len(PINNED) == len(set(PINNED))


def test_the_package_keeps_its_public_names():
    for name in ("DEFAULT_PORT", "PrometheusSink", "SPECS", "RecordCollector", "markdown_table"):
        assert getattr(prometheus, name) is not None
    assert prometheus.DEFAULT_PORT == 9101
    assert "input-bound: disk" in prometheus.VERDICTS


def test_status_command_does_not_load_the_exporter():
    code = (
        "import sys, diskinfo.commands.status; "
        "print(sorted(m for m in sys.modules if m.startswith("
        "('diskinfo.sinks.prometheus.', 'prometheus_client'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_docs_table_is_generated_by_the_package_main():
    out = subprocess.run(
        [sys.executable, "-m", "diskinfo.sinks.prometheus"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout == prometheus.markdown_table()
