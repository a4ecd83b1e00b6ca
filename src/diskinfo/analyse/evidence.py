"""The figures behind a verdict, in words: what the log, /status and the report show under it.

Apart from the rules in `verdict` so that changing how a figure reads never touches how an
interval is judged; the cgroup-cap line is shared, as it is both evidence and a cause's why.
"""

from __future__ import annotations

from diskinfo import thresholds as t
from diskinfo.analyse.fixes import cap_words, mb
from diskinfo.analyse.signals import Signals, severity_of
from diskinfo.analyse.steady import held_until


def capped_line(s: Signals) -> str:
    """The cgroup read cap, and whether the device under it is busy at all."""
    c = s.capped
    assert c is not None
    how = "blkio throttle" if c.version == 1 else "io.max"
    line = (
        f"this container's reads are capped by its cgroup at {cap_words(c)} ({how} on "
        f"{c.device}; it reads {c.read_ios_s:.0f} IOPS, {c.read_bytes_s / 2**20:.1f} MB/s)"
    )
    d = s.disk
    if d is None or d.util < t.DISK_BUSY_UTIL_PCT:
        util = f" (%util {d.util:.0f}%)" if d is not None else ""
        line += f"; the device itself is not busy{util}"
    return line


def cpu_words(s: Signals) -> str:
    """The CPU figure the verdict judges by, with the host's as context."""
    h = s.host
    if h is None or s.cpu_busy is None:
        return ""
    busy = t.shown(s.cpu_busy, t.CPU_SATURATED_PCT)
    if s.cpu_scope == "container" and h.cgroup_cpu_cores is not None:
        quota = " by quota" if h.cgroup_cpu_quota else ""
        return (
            f"CPU: this container uses {h.cgroup_cpu_cores:.1f} of its {s.cpu_cores or 0:g} "
            f"cores{quota} ({busy}% busy); the host {h.cpu_busy:.0f}% busy of {h.cpu_count} "
            f"cores, iowait {h.cpu_iowait:.0f}%"
        )
    return f"CPU {busy}% busy of {h.cpu_count} cores, iowait {h.cpu_iowait:.0f}%"


def evidence(s: Signals) -> list[str]:
    """Every figure the interval was judged by, one line each, for the log and the report."""
    out: list[str] = []
    if s.share is not None:
        label = {"high": "HIGHLY input-bound", "moderate": "moderately input-bound"}.get(
            s.severity, "not input-bound"
        )
        threshold = t.MODERATELY_INPUT_BOUND if s.severity == "none" else t.HIGHLY_INPUT_BOUND
        if s.steady is not None and severity_of(s.share) != s.severity:  # within the band
            label += f", held until under {held_until(s.severity) * 100:.0f}%"
        window = ""
        if s.steady is not None and s.steady.low != s.steady.high:
            k = s.steady
            window = (
                f" over the last {k.seconds:.0f} s ({k.low * 100:.0f}-{k.high * 100:.0f}% per "
                f"interval{': borderline, held' if k.borderline else ''})"
            )
        out.append(
            f"data-wait {t.pct(s.share, threshold)} of step time{window} ({label}; XProf: >= "
            f"{t.HIGHLY_INPUT_BOUND * 100:.0f}% highly, >= {t.MODERATELY_INPUT_BOUND * 100:.0f}% "
            f"moderately)"
        )
    elif s.loop_active is False:
        out.append("the training loop fetched no batches this interval")
    else:
        out.append("no training-loop figures")
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
            f"r_await {d.r_await:.1f} ms, aqu-sz {d.aqu_sz:.2f} ({d.aqu_sz / s.readers:.2f} per "
            f"reader), util {d.util:.0f}%"
        )
        if s.bandwidth is not None and s.bandwidth.seq_read_mb_s > 0:
            share = d.rmb_s / s.bandwidth.seq_read_mb_s
            line += (
                f"; {t.pct(share, t.NEAR_BANDWIDTH)} of its measured "
                f"{s.bandwidth.seq_read_mb_s:.0f} MB/s ({s.bandwidth.rand_read_iops:.0f} random "
                "4k IOPS)"
            )
        out.append(line)
    if s.capped is not None:
        out.append(capped_line(s))
    if s.host is not None:
        out.append(cpu_words(s))
        h = s.host
        if h.dataset_mb is not None:
            fits = "fits" if s.fits else "does not fit"
            out.append(
                f"dataset {mb(h.dataset_mb)}, page cache {mb(h.page_cache_mb)}, "
                f"{mb(h.mem_available_mb)} available: the data {fits} in RAM"
            )
    if s.worker_cpu is not None:
        out.append(
            f"{s.workers} DataLoader worker(s) at {t.shown(s.worker_cpu, t.PROC_SATURATED_PCT)}% "
            "of a core each"
        )
    if s.loader is not None and s.loader.num_workers is not None:
        out.append(
            f"DataLoader num_workers={s.loader.num_workers}, pin_memory={s.loader.pin_memory}, "
            f"persistent_workers={s.loader.persistent_workers}"
        )
    return [line for line in out if line]
