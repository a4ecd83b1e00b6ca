"""Renders the latest interval record as metric families at scrape time.

Families built from the record at each scrape instead of global metric objects: the record is
the single source, and a device that disappears simply stops being
exported. Raw cumulative counters (from /proc/diskstats and mountstats) let Prometheus compute
rates over any window; gauges carry diskinfo's own figures for the last interval.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from diskinfo import __version__
from diskinfo.analyse.pressure import STATES, node_pressure, redact
from diskinfo.record import VERDICTS, IntervalRecord
from diskinfo.sinks.prometheus.exposition import Family
from diskinfo.sinks.prometheus.metrics import (
    CGROUP_COUNTERS,
    CGROUP_GAUGES,
    DISK_COUNTERS,
    DISK_GAUGES,
    GPU_GAUGES,
    HOST_GAUGES,
    LOADER_COUNTERS,
    MIB,
    NFS_COUNTERS,
    NFS_GAUGES,
    SPECS,
)


@dataclass
class _Totals:
    """What the exporter accumulates itself from per-interval figures."""

    records: int = 0
    loader: dict[str, float] | None = None
    verdict_s: dict[str, float] = field(default_factory=dict)

    def copy(self) -> _Totals:
        """A snapshot the scrape thread can render while the sampler adds to the original."""
        loader = dict(self.loader) if self.loader is not None else None
        return _Totals(self.records, loader, dict(self.verdict_s))

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


def _family(name: str) -> Family:
    spec = SPECS[name]
    return Family(name, spec.kind, spec.help, spec.labels)


def _figures(
    table: dict[str, tuple[str, float, str]],
    items: Iterable[tuple[list[str], Any]],
    values: Callable[[Any], dict[str, Any] | None],
) -> Iterator[Family]:
    """One family per table row over several labelled objects; None values are left out
    (a figure the kernel does not have is absent, not zero)."""
    families: dict[str, Family] = {}
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
            families[name].add(labels, float(value) * factor)
    yield from families.values()


def _ranks(record: IntervalRecord) -> Iterator[Family]:
    """Per rank of a distributed job on this node: the figures by `rank` alone, the job and
    node on the info metric, joined in PromQL `on(instance, rank)`."""
    ranks = record.loader.ranks if record.loader is not None else []
    if not ranks:
        return
    info = _family("diskinfo_rank_info")
    wait = _family("diskinfo_rank_data_wait_ratio")
    rate = _family("diskinfo_rank_batches_per_second")
    for r in ranks:
        label = [str(r.rank)]
        info.add([*label, r.job_id, r.node, str(r.world_size)], 1.0)
        wait.add(label, r.wait_share)
        rate.add(label, r.batches / record.elapsed_s if record.elapsed_s > 0 else 0.0)
    yield from (info, wait, rate)


class RecordCollector:
    """Renders the latest record at scrape time."""

    def __init__(self, snapshot: Callable[[], tuple[IntervalRecord | None, _Totals]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Family]:
        record, totals = self._snapshot()
        fam = _family("diskinfo_build_info")
        fam.add([__version__], 1)
        yield fam
        fam = _family("diskinfo_records_total")
        fam.add([], totals.records)
        yield fam
        fam = _family("diskinfo_node_pressure")
        state = node_pressure(record, time.time()).state
        for name in STATES:
            fam.add([name], 1.0 if name == state else 0.0)
        yield fam
        if totals.loader is not None:
            for key, (name, _f, _help) in LOADER_COUNTERS.items():
                fam = _family(name)
                fam.add([], totals.loader[key])
                yield fam
        if totals.verdict_s:
            fam = _family("diskinfo_verdict_seconds_total")
            for name in sorted(set(VERDICTS) | set(totals.verdict_s)):
                fam.add([name], totals.verdict_s.get(name, 0.0))
            yield fam
        if record is None:
            return
        yield from self._record(record)

    def _record(self, record: IntervalRecord) -> Iterator[Family]:
        for name, value in (
            ("diskinfo_last_record_timestamp_seconds", record.ts),
            ("diskinfo_interval_seconds", record.elapsed_s),
            ("diskinfo_record_warnings", len(record.warnings)),
            ("diskinfo_gpus", len(record.gpus or [])),
        ):
            fam = _family(name)
            fam.add([], value)
            yield fam
        fam = _family("diskinfo_watched_path_info")
        for dev in record.devices:
            for path in dev.paths:
                fam.add([path, dev.device], 1)
        yield fam

        devices = [([d.device], d) for d in record.devices]
        yield from _figures(DISK_COUNTERS, devices, lambda d: d.counters)
        fam = _family("diskinfo_disk_io_now")
        for dev in record.devices:
            fam.add([dev.device], dev.in_flight)
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
                fam.add([role], value)
            yield fam
        if record.loader is not None:
            for name, value in (
                ("diskinfo_loader_data_wait_ratio", record.loader.wait_share),
                ("diskinfo_loader_batches_per_second", record.loader.batches_s),
            ):
                fam = _family(name)
                fam.add([], value)
                yield fam
            yield from _ranks(record)
        if record.verdict is not None:
            fam = _family("diskinfo_verdict")
            current = record.verdict.verdict
            for name in sorted(set(VERDICTS) | {current}):
                fam.add([name], 1.0 if name == current else 0.0)
            yield fam
            if record.verdict.fix_ids:
                # an alert can name the fix only through a label (rules.yml queries it): its
                # stable id (analyse.fix_ids.FixId), never its words, which change with the figures
                fam = _family("diskinfo_verdict_fix_info")
                fam.add([current, str(record.verdict.fix_ids[0])], 1.0)
                yield fam
