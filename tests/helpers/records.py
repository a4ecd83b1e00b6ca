"""One way to build an IntervalRecord in tests: `record` with only the parts a test gives,
`training_record` for a typical training node, `full_record` with every part filled."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from diskinfo.analyse.fix_ids import FixId
from diskinfo.record import (
    CgroupIO,
    DeviceFigures,
    GpuFigures,
    HostFigures,
    IntervalRecord,
    LoaderFigures,
    NfsFigures,
    ProcessIO,
    RankFigures,
    Verdict,
)


def record(
    *devices: DeviceFigures,
    ts: float | None = None,
    elapsed: float = 5.0,
    verdict: str | Verdict | None = None,
    **parts: Any,
) -> IntervalRecord:
    """Devices positional, any other part of the record by name (a tuple becomes a list);
    `verdict` a name or a Verdict; `ts` now unless given."""
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in parts.items()}
    if devices:
        fields["devices"] = list(devices)
    return IntervalRecord(
        ts=time.time() if ts is None else ts,
        elapsed_s=elapsed,
        verdict=Verdict(verdict) if isinstance(verdict, str) else verdict,
        **fields,
    )


def disk(device: str = "nvme0n1", **figures: Any) -> DeviceFigures:
    """A watched NVMe device with the given iostat figures."""
    figures.setdefault("paths", ["/workspace/data"])
    return DeviceFigures(device=device, **figures)


def host(busy=20.0, iowait=0.0, dataset=None, available=20000.0, shm=16384.0) -> HostFigures:
    """A 16-core host with 32 GB of memory and a 16 GiB /dev/shm."""
    return HostFigures(
        cpu_busy=busy,
        cpu_iowait=iowait,
        cpu_count=16,
        page_cache_mb=1000.0,
        mem_total_mb=32000.0,
        mem_available_mb=available,
        dataset_mb=dataset,
        shm_total_mb=shm,
    )


def loader(share, workers=0, errors=0, elapsed=5.0, pin=False, ranks=1) -> LoaderFigures:
    """A training loop that waited `share` of its busy time for data (in each of `ranks`
    processes, each with `workers` DataLoader workers: the sum the collector makes)."""
    busy = elapsed * 0.99 * ranks
    return LoaderFigures(
        batches=100 * ranks,
        wait_s=busy * share,
        step_s=busy * (1 - share),
        wait_share=share,
        processes=ranks,
        num_workers=workers,
        pin_memory=pin,
        persistent_workers=False,
        worker_errors=errors,
    )


def training_record(**parts: Any) -> IntervalRecord:
    """A training node's interval: one watched NVMe and the host figures unless given."""
    parts.setdefault("devices", [disk()])
    parts.setdefault("cpu", host())
    parts.setdefault("ts", 0.0)
    return record(**parts)


DISKSTATS = {  # raw kernel values, as collectors.disk.counters_of gives them
    "rd_ios": 1000,
    "rd_merges": 10,
    "rd_sectors": 2048,
    "rd_ticks": 1500,
    "wr_ios": 500,
    "wr_merges": 5,
    "wr_sectors": 4096,
    "wr_ticks": 250,
    "io_ticks": 9000,
    "rq_ticks": 12000,
    "dc_ios": 3,
    "dc_merges": 0,
    "dc_sectors": 16,
    "dc_ticks": 7,
    "fl_ios": 40,
    "fl_ticks": 80,
}


def full_record(secret: str = "", **over: Any) -> IntervalRecord:
    """A record with every part filled, so every declared metric has something to show; `secret`
    is planted wherever a careless exporter might copy text from."""
    rec = IntervalRecord(
        ts=time.time(),
        elapsed_s=2.0,
        host="node-1",
        devices=[
            DeviceFigures(
                "nvme0n1",
                paths=["/workspace/data", "/workspace/ckpt"],
                r_s=100.0,
                w_s=20.0,
                rmb_s=50.0,
                wmb_s=2.0,
                rrqm_s=1.0,
                wrqm_s=2.0,
                r_await=4.0,
                w_await=1.0,
                aqu_sz=0.7,
                rareq_sz=512.0,
                wareq_sz=100.0,
                util=97.0,
                in_flight=3,
                d_s=0.5,
                dmb_s=0.1,
                drqm_s=0.0,
                d_await=2.0,
                dareq_sz=4.0,
                f_s=1.0,
                f_await=0.5,
                counters=dict(DISKSTATS),
            )
        ],
        nfs=[
            NfsFigures(
                "/mnt/nas",
                f"alice:{secret}@nas01",
                read_bytes_s=1e6,
                read_ops_s=10,
                read_rtt_ms=3.0,
                counters={
                    "read_bytes": 10**9,
                    "write_bytes": 5,
                    "read_ops": 1000,
                    "write_ops": 1,
                    "read_rtt_ms": 3000,
                    "write_rtt_ms": 1,
                    "read_exe_ms": 3500,
                    "write_exe_ms": 2,
                    "retrans": 4,
                },
            )
        ],
        gpus=[
            GpuFigures(
                0,
                "NVIDIA H200",
                util_mean=40.0,
                util_min=0.0,
                util_max=100.0,
                idle_fraction=0.5,
                pulsing=0.6,
                mem_used_mb=1024,
                mem_total_mb=143771,
                pcie_rx_mb_s=100,
                pcie_tx_mb_s=1,
                power_w=300,
                samples=20,
                uuid="GPU-6c8b7a4e-0000-0000-0000-000000000000",
                training=True,
                training_by="wrapper",
            )
        ],
        cpu=HostFigures(
            cpu_busy=50,
            cpu_iowait=10,
            cpu_count=16,
            page_cache_mb=100,
            mem_total_mb=1000,
            mem_available_mb=500,
            dataset_mb=2000,
            shm_total_mb=64,
        ),
        procs=[
            ProcessIO(1, f"python --token={secret}", read_mb_s=1.0, role="main"),
            ProcessIO(2, "pt_data_worker", read_mb_s=2.0, role="worker"),
            ProcessIO(3, "pt_data_worker", read_mb_s=3.0, role="worker"),
        ],
        loader=LoaderFigures(
            batches=10,
            wait_s=1.5,
            step_s=0.5,
            wait_share=0.75,
            batches_s=5,
            world_size=2,
            ranks=[RankFigures(1, 2, "slurm-7", "node-2", 1, 4242, 10, 1.5, 0.5, 0.75)],
        ),
        verdict=Verdict(
            "input-bound: disk",
            summary=f"summary {secret}",
            evidence=[f"evidence {secret}"],
            # fixes are fixed words and figures (analyse/fixes.py), never copied text: the
            # first one is exported for alert text
            fixes=["move the data to faster local storage"],
            fix_ids=[FixId.FASTER_STORAGE],
        ),
        warnings=[f"warning quoting JUPYTER_TOKEN={secret}"],
        cgroup_io=[
            CgroupIO(
                "nvme0n1",
                "259:0",
                read_bytes_s=4e6,
                write_bytes_s=1.0,
                read_ios_s=1000.0,
                write_ios_s=1.0,
                read_bps=10**9,
                write_bps=10**8,
                read_iops=1000,
                write_iops=500,
                throttled=True,
                throttled_by=["read_iops"],
                pressure_some_avg10=60.0,
                pressure_full_avg10=55.0,
                counters={
                    "read_bytes": 4096000,
                    "write_bytes": 1,
                    "read_ios": 1000,
                    "write_ios": 1,
                    "discard_bytes": 0,
                    "discard_ios": 0,
                },
            )
        ],
    )
    for key, value in over.items():
        setattr(rec, key, value)
    return rec


def write_run(path: Path, records: list[IntervalRecord]) -> Path:
    """The records as a monitor's JSONL file."""
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))
    return path


# The held-verdict and log-line tests' interval: a 16-core host, one watched loop device,
# 5 s long; SMALL_FILE_READS is what a cold tree of small files shows on it.
def loop_figures(share: float, workers: int = 0) -> LoaderFigures:
    return LoaderFigures(
        batches=50,
        wait_s=4.9 * share,
        step_s=4.9 * (1 - share),
        wait_share=share,
        processes=1,
        num_workers=workers,
    )


def judged_record(**kw) -> IntervalRecord:
    kw.setdefault("cpu", HostFigures(cpu_busy=10, cpu_count=16, mem_available_mb=20000))
    kw.setdefault("devices", [DeviceFigures("loop0", paths=["/data"])])
    return IntervalRecord(ts=1796217557.0, elapsed_s=5.0, **kw)


SMALL_FILE_READS = [
    DeviceFigures("loop0", paths=["/data"], r_s=1595, rmb_s=94.2, rareq_sz=60, aqu_sz=1.1)
]
