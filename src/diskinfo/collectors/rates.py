"""Counters -> `iostat -x` figures. Every formula lives here, in `figures` and its helpers.

The formulas are sysstat 12.x's: iostat.c `write_ext_stat`, and rd_stats.c
`compute_ext_disk_stats` (in rd_stats.c since sysstat 11.7.1, common.c before), where
S_VALUE(m, n, p) = (n - m) / p per second:

    r/s      = d(rd_ios) / dt                 rMB/s    = d(rd_sectors) / 2048 / dt
    rrqm/s   = d(rd_merges) / dt              %rrqm    = d(rd_merges) / d(rd_merges + rd_ios) * 100
    r_await  = d(rd_ticks) / d(rd_ios)  [ms]  rareq-sz = d(rd_sectors) / d(rd_ios) / 2  [kB]
    aqu-sz   = d(rq_ticks) / dt / 1000        %util    = d(io_ticks) / dt / 10
    f_await  = d(fl_ticks) / d(fl_ios)

(the same for w_ and d_; sectors are 512 bytes, MB = 2**20, kB = 1024; a ratio whose
divisor did not move is 0.0, as in iostat). dt is the measured elapsed time in seconds;
iostat takes it from /proc/uptime deltas, we take it from time.monotonic() at each read.
"""

from __future__ import annotations

import math
import operator

from diskinfo.record import DeviceFigures, NfsFigures
from diskinfo.sources.diskstats import ALL_FIELDS, TIME_FIELDS, DiskCounters
from diskinfo.sources.mountstats import NfsMount, OpStats
from diskinfo.units import SECTOR_BYTES

# Largest plausible growth per second of one counter; a delta beyond it is a reset, not I/O.
_MAX_OPS_S = 50_000_000  # ios and merges
_MAX_SECTORS_S = 1 << 30  # 512 GiB/s
_MAX_TICKS_S = 1_000_000  # ms of time per second: up to 1000 requests in flight on average...
_MAX_QUEUE_TICKS_S = 100_000_000  # ...and up to 100k for the weighted time (aqu-sz)


def counter_delta(prev: int, cur: int, bits: int, limit: float) -> int | None:
    """Growth of a cumulative counter, or None when it was reset.

    A counter that went down either wrapped at 2**bits or was reset (device removed and
    re-added, driver reload). The kernel's times are 32-bit; its counts are 64-bit on 64-bit
    kernels and 32-bit on 32-bit ones, so a count that went down is also tried at 32 bits.
    A wrap is believed only when the wrapped delta is plausible for the elapsed time.
    """
    if cur >= prev:
        delta = cur - prev
        return delta if delta <= limit else None
    for width in (32, bits) if bits > 32 else (bits,):
        if prev < (1 << width):
            wrapped = cur + (1 << width) - prev
            if wrapped <= limit:
                return wrapped
    return None


def _per_second_limit(name: str) -> float:
    if name == "rq_ticks":
        return _MAX_QUEUE_TICKS_S
    if name in TIME_FIELDS:
        return _MAX_TICKS_S
    if name.endswith("_sectors"):
        return _MAX_SECTORS_S
    return _MAX_OPS_S


# per counter of DiskCounters[3:] (kernel order): bit width and largest plausible growth per
# second; in_flight is a gauge, not a counter: its "growth" is never judged
_WIDTHS = tuple(32 if name in TIME_FIELDS else 64 for name in ALL_FIELDS)
_LIMITS = tuple(
    float("inf") if name == "in_flight" else _per_second_limit(name) for name in ALL_FIELDS
)
_IN_FLIGHT = ALL_FIELDS.index("in_flight")


def deltas(prev: DiskCounters, cur: DiskCounters, dt: float) -> list[int] | None:
    """Every counter's growth over the interval, in DiskCounters[3:] order (in_flight: 0);
    None when the device's counters were reset.

    Fields the kernel does not report (discard, flush on older kernels) are left off the end.
    The common case (no counter went back or jumped) is one pass in C over the tuples; the
    monitor runs this for every watched device every second.
    """
    known = min(prev.reported, cur.reported)
    before, now = prev[3 : 3 + known], cur[3 : 3 + known]
    out = list(map(operator.sub, now, before))
    out[_IN_FLIGHT] = 0
    span = max(dt, 1.0)
    # delta / limit <= span for each (_LIMITS has all 17 fields, map stops at the kernel's)
    if min(out) >= 0 and max(map(operator.truediv, out, _LIMITS)) <= span:
        return out
    for i, (p, c) in enumerate(zip(before, now, strict=True)):
        if i != _IN_FLIGHT and not (0 <= out[i] <= _LIMITS[i] * span):
            d = counter_delta(p, c, _WIDTHS[i], _LIMITS[i] * span + 1)
            if d is None:
                return None
            out[i] = d
    return out


# --- the figures (sysstat iostat.c write_ext_stat) -------------------------------------


def per_second(delta: int, dt: float) -> float:
    """r/s, w/s, d/s, f/s, rrqm/s, wrqm/s, drqm/s: S_VALUE(prev, cur, itv)."""
    return delta / dt if dt > 0 else 0.0


def merge_percent(d_merges: int, d_ios: int) -> float:
    """%rrqm, %wrqm, %drqm: merges / (merges + ios) * 100, 0.0 with neither."""
    total = d_merges + d_ios
    return d_merges / total * 100.0 if total else 0.0


def await_ms(d_ticks: int, d_ios: int) -> float:
    """r_await, w_await, d_await, f_await: d(ticks) / d(ios) in ms, 0.0 without I/O."""
    return d_ticks / d_ios if d_ios else 0.0


def areq_sz_kb(d_sectors: int, d_ios: int) -> float:
    """rareq-sz, wareq-sz, dareq-sz: d(sectors) / d(ios) / 2, in kB (1024 bytes)."""
    return d_sectors / d_ios / 2.0 if d_ios else 0.0


def figures(prev: DiskCounters, cur: DiskCounters, dt: float) -> DeviceFigures | None:
    """The iostat -x set for one device between two snapshots dt seconds apart.

    None when the counters were reset in between (the caller re-baselines). Rates are
    S_VALUE = delta / dt; MB/s is that / 2048 (sectors to MB = 2**20 bytes); aqu-sz is the
    weighted time's / 1000 and %util the busy time's / 10 (ms per second; not capped at 100,
    as iostat does not cap it: above 100 the clock and the counters disagree, which the user
    should see rather than have hidden).
    """
    d = deltas(prev, cur, dt)
    if d is None:
        return None
    if not dt > 0:
        dt = math.inf  # no time: every rate is 0.0
    rd_ios, rd_merges, rd_sectors, rd_ticks, wr_ios, wr_merges, wr_sectors, wr_ticks = d[:8]
    fig = DeviceFigures(
        device=cur.name,
        r_s=rd_ios / dt,
        w_s=wr_ios / dt,
        rmb_s=rd_sectors / dt / 2048.0,
        wmb_s=wr_sectors / dt / 2048.0,
        rrqm_s=rd_merges / dt,
        wrqm_s=wr_merges / dt,
        r_await=await_ms(rd_ticks, rd_ios),
        w_await=await_ms(wr_ticks, wr_ios),
        aqu_sz=d[10] / dt / 1000.0,  # rq_ticks
        rareq_sz=areq_sz_kb(rd_sectors, rd_ios),
        wareq_sz=areq_sz_kb(wr_sectors, wr_ios),
        util=d[9] / dt / 10.0,  # io_ticks
        in_flight=cur.in_flight,
        rrqm_pct=merge_percent(rd_merges, rd_ios),
        wrqm_pct=merge_percent(wr_merges, wr_ios),
        read_bytes=rd_sectors * SECTOR_BYTES,
        write_bytes=wr_sectors * SECTOR_BYTES,
    )
    if len(d) >= 15:
        dc_ios, dc_merges, dc_sectors, dc_ticks = d[11:15]
        fig.d_s = dc_ios / dt
        fig.dmb_s = dc_sectors / dt / 2048.0
        fig.drqm_s = dc_merges / dt
        fig.drqm_pct = merge_percent(dc_merges, dc_ios)
        fig.d_await = await_ms(dc_ticks, dc_ios)
        fig.dareq_sz = areq_sz_kb(dc_sectors, dc_ios)
    if len(d) >= 17:
        fig.f_s = d[15] / dt
        fig.f_await = await_ms(d[16], d[15])
    return fig


# --- NFS, as nfsiostat (nfs-utils tools/nfs-iostat/nfs-iostat.py) computes it ----------


def nfs_counters(m: NfsMount) -> dict[str, int]:
    """Cumulative per-mount counters: payload bytes from `bytes:` (normal + O_DIRECT), the
    READ and WRITE operation lines for ops, RTT, execute time and retransmissions."""
    read, write = m.ops.get("READ", OpStats()), m.ops.get("WRITE", OpStats())
    b = m.bytes
    return {
        "read_bytes": b.get("normal_read", 0) + b.get("direct_read", 0),
        "write_bytes": b.get("normal_write", 0) + b.get("direct_write", 0),
        "read_ops": read.ops,
        "write_ops": write.ops,
        "read_rtt_ms": read.rtt_ms,
        "write_rtt_ms": write.rtt_ms,
        "read_exe_ms": read.execute_ms,
        "write_exe_ms": write.execute_ms,
        "retrans": max(0, read.ntrans - read.ops) + max(0, write.ntrans - write.ops),
    }


def nfs_figures(prev: NfsMount, cur: NfsMount, dt: float) -> NfsFigures | None:
    """nfsiostat's figures: rtt = d(rtt)/d(ops), exe = d(execute)/d(ops),
    retrans = d(ntrans) - d(ops); None after a remount (age or a counter went back)."""
    if cur.age < prev.age:
        return None
    p, c = nfs_counters(prev), nfs_counters(cur)
    d = {k: c[k] - p[k] for k in c}
    if any(v < 0 for k, v in d.items() if k != "retrans"):
        return None
    return NfsFigures(
        mount=cur.mountpoint,
        server=cur.server,
        read_bytes_s=per_second(d["read_bytes"], dt),
        write_bytes_s=per_second(d["write_bytes"], dt),
        read_ops_s=per_second(d["read_ops"], dt),
        write_ops_s=per_second(d["write_ops"], dt),
        read_rtt_ms=await_ms(d["read_rtt_ms"], d["read_ops"]),
        write_rtt_ms=await_ms(d["write_rtt_ms"], d["write_ops"]),
        read_exe_ms=await_ms(d["read_exe_ms"], d["read_ops"]),
        write_exe_ms=await_ms(d["write_exe_ms"], d["write_ops"]),
        retrans=max(0, d["retrans"]),
        counters=c,
    )
