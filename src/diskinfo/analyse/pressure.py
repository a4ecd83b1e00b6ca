"""Node storage pressure for schedulers: may another job start on this node, or not?

A pure function of the latest interval record, so that a scheduler hook (Slurm prolog,
Kubernetes node labeller) gets the same answer as the alert rules and the verdicts:
`ok`, `busy` or `saturated`, with the figures that led to it. `unknown` while the monitor has
no recent record (just started, or its loop is stuck).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from diskinfo import __version__
from diskinfo.record import (
    DeviceFigures,
    IntervalRecord,
    NfsFigures,
    VerdictName,
    training_gpus,
)
from diskinfo.thresholds import (
    AWAIT_BUSY_MS,
    AWAIT_SATURATED_MS,
    MIN_IOPS,
    NFS_RTT_BUSY_MS,
    NFS_RTT_SATURATED_MS,
    STALE_INTERVALS,
    STALE_MIN_S,
    UTIL_BUSY,
    UTIL_SATURATED,
)

STATUS_SCHEMA = "diskinfo.status/1"

LEVELS = ("ok", "busy", "saturated")
STATES = (*LEVELS, "unknown")


@dataclass
class Pressure:
    state: str  # one of STATES
    evidence: list[str] = field(default_factory=list)


def device_await_ms(dev: DeviceFigures) -> float:
    """Mean time per request over reads and writes, as iostat's `await`."""
    ops = dev.r_s + dev.w_s
    if ops <= 0:
        return 0.0
    return (dev.r_s * dev.r_await + dev.w_s * dev.w_await) / ops


def _graded(
    value: float, busy: float, saturated: float, name: str, unit: str
) -> tuple[int, list[str]]:
    """(2, why) at or above `saturated`, (1, why) at or above `busy`, else (0, [])."""
    for level, line in ((2, saturated), (1, busy)):
        if value >= line:
            return level, [f"{name} {value:.1f}{unit} >= {line:g}{unit}"]
    return 0, []


def _device_level(dev: DeviceFigures) -> tuple[int, list[str]]:
    level, why = _graded(dev.util, UTIL_BUSY, UTIL_SATURATED, f"{dev.device}: %util", "%")
    if dev.r_s + dev.w_s >= MIN_IOPS:
        wait = device_await_ms(dev)
        lvl, more = _graded(wait, AWAIT_BUSY_MS, AWAIT_SATURATED_MS, f"{dev.device}: await", " ms")
        level, why = max(level, lvl), why + more
    return level, why


def _nfs_level(nfs: NfsFigures) -> tuple[int, list[str]]:
    level, why = 0, []
    for op, ops, rtt in (
        ("read", nfs.read_ops_s, nfs.read_rtt_ms),
        ("write", nfs.write_ops_s, nfs.write_rtt_ms),
    ):
        if ops >= MIN_IOPS:
            name = f"{nfs.mount}: NFS {op} RTT"
            lvl, more = _graded(rtt, NFS_RTT_BUSY_MS, NFS_RTT_SATURATED_MS, name, " ms")
            level, why = max(level, lvl), why + more
    return level, why


_USERINFO = re.compile(r"(?<![\w.-])[^\s/@:]+(?::[^\s/@]*)?@(?=[\w\[])")


def redact(text: str) -> str:
    """Drop `user:password@` from a mount source such as `//user:pw@nas/share` or
    `user@host:/export`: mount sources go into labels and /status, credentials never do."""
    return _USERINFO.sub("", text)


def stale_after_s(interval_s: float) -> float:
    return max(STALE_MIN_S, STALE_INTERVALS * interval_s)


def node_pressure(record: IntervalRecord | None, now: float | None = None) -> Pressure:
    """The node's storage pressure from one record; `now` (Unix seconds) enables the staleness
    check: a record older than a few intervals says nothing about the node any more."""
    if record is None:
        return Pressure("unknown", ["no interval measured yet"])
    if now is not None:
        age = now - record.ts
        limit = stale_after_s(record.elapsed_s)
        if age > limit:
            return Pressure("unknown", [f"last record is {age:.0f} s old (> {limit:.0f} s)"])
    level, evidence = 0, []
    for dev in record.devices:
        dev_level, why = _device_level(dev)
        level = max(level, dev_level)
        evidence += why
    for nfs in record.nfs:
        nfs_level, why = _nfs_level(nfs)
        level = max(level, nfs_level)
        evidence += why
    verdict = record.verdict.verdict if record.verdict else ""
    if verdict == VerdictName.INPUT_DISK:
        level = 2
        evidence.append(f"verdict: {verdict}")
    if not evidence:
        evidence.append(
            f"every watched device below %util {UTIL_BUSY:g}% and await {AWAIT_BUSY_MS:g} ms"
        )
    return Pressure(LEVELS[level], evidence)


def status_document(record: IntervalRecord | None, now: float) -> dict[str, Any]:
    """The /status JSON: the pressure, its evidence and the figures behind it. Built from the
    record's figures only (never environment, command lines or warnings text), so nothing
    secret can leak into it."""
    pressure = node_pressure(record, now)
    u = [g.util_mean for g in training_gpus(record.gpus)] if record is not None else []
    doc: dict[str, Any] = {
        "schema": STATUS_SCHEMA,
        "version": __version__,
        "pressure": pressure.state,
        "evidence": pressure.evidence,
    }
    if record is None:
        return doc
    doc.update(
        host=record.host,
        ts=record.ts,
        age_s=round(now - record.ts, 3),
        interval_s=round(record.elapsed_s, 3),
        verdict=record.verdict.verdict if record.verdict else None,
        data_wait_share=record.loader.wait_share if record.loader else None,
        ranks=[
            {
                "rank": r.rank,
                "world_size": r.world_size,
                "job_id": r.job_id,
                "node": r.node,
                "local_rank": r.local_rank,
                "data_wait_share": round(r.wait_share, 4),
                "batches": r.batches,
            }
            for r in (record.loader.ranks if record.loader else [])
        ],
        gpu_util_mean=(sum(u) / len(u) if u else None),
        gpus_unused=[g.index for g in record.gpus or [] if g.training is False],
        devices=[
            {
                "device": d.device,
                "paths": list(d.paths),
                "util": d.util,
                "await_ms": round(device_await_ms(d), 3),
                "r_await": d.r_await,
                "w_await": d.w_await,
                "aqu_sz": d.aqu_sz,
                "rmb_s": d.rmb_s,
                "wmb_s": d.wmb_s,
                "r_s": d.r_s,
                "w_s": d.w_s,
                "pressure": LEVELS[_device_level(d)[0]],
            }
            for d in record.devices
        ],
        nfs=[
            {
                k: v
                for k, v in asdict(n).items()
                if k != "counters"  # raw counters are for /metrics
            }
            | {"server": redact(n.server), "pressure": LEVELS[_nfs_level(n)[0]]}
            for n in record.nfs
        ],
    )
    return doc
