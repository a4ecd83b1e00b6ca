"""Counters -> `iostat -x` figures. Every formula lives here, one function per figure.

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


# (counter, bit width, largest plausible growth per second); in_flight is a gauge, not here
_COUNTERS = tuple(
    (name, 32 if name in TIME_FIELDS else 64, _per_second_limit(name))
    for name in ALL_FIELDS
    if name != "in_flight"
)


def deltas(prev: DiskCounters, cur: DiskCounters, dt: float) -> dict[str, int] | None:
    """Every counter's growth over the interval; None when the device's counters were reset.

    Fields the kernel does not report (discard, flush on older kernels) are left out.
    in_flight is an instantaneous gauge, not a counter, and is not in the result.
    """
    out: dict[str, int] = {}
    span = max(dt, 1.0)
    for name, bits, per_s in _COUNTERS:
        p, c = getattr(prev, name), getattr(cur, name)
        if p is None or c is None:
            continue
        if c >= p and c - p <= per_s * span:  # the common case, without a call
            out[name] = c - p
            continue
        d = counter_delta(p, c, bits, per_s * span + 1)
        if d is None:
            return None
        out[name] = d
    return out


# --- one function per figure (sysstat iostat.c write_ext_stat) -------------------------


def per_second(delta: int, dt: float) -> float:
    """r/s, w/s, d/s, f/s, rrqm/s, wrqm/s, drqm/s: S_VALUE(prev, cur, itv)."""
    return delta / dt if dt > 0 else 0.0


def mb_per_second(d_sectors: int, dt: float) -> float:
    """rMB/s, wMB/s, dMB/s (iostat -m): S_VALUE(sectors) / 2048, i.e. MB = 2**20 bytes."""
    return per_second(d_sectors, dt) / 2048.0


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


def aqu_sz(d_rq_ticks: int, dt: float) -> float:
    """aqu-sz: S_VALUE(rq_ticks) / 1000, the weighted time over the interval."""
    return per_second(d_rq_ticks, dt) / 1000.0


def util_percent(d_io_ticks: int, dt: float) -> float:
    """%util: S_VALUE(tot_ticks) / 10 (ms busy per second as a percentage).

    Not capped at 100, as iostat does not cap it: a value above 100 means the clock
    and the counters disagree, which the user should see rather than have hidden.
    """
    return per_second(d_io_ticks, dt) / 10.0


def figures(prev: DiskCounters, cur: DiskCounters, dt: float) -> DeviceFigures | None:
    """The iostat -x set for one device between two snapshots dt seconds apart.

    None when the counters were reset in between (the caller re-baselines).
    """
    d = deltas(prev, cur, dt)
    if d is None:
        return None
    fig = DeviceFigures(
        device=cur.name,
        r_s=per_second(d["rd_ios"], dt),
        w_s=per_second(d["wr_ios"], dt),
        rmb_s=mb_per_second(d["rd_sectors"], dt),
        wmb_s=mb_per_second(d["wr_sectors"], dt),
        rrqm_s=per_second(d["rd_merges"], dt),
        wrqm_s=per_second(d["wr_merges"], dt),
        r_await=await_ms(d["rd_ticks"], d["rd_ios"]),
        w_await=await_ms(d["wr_ticks"], d["wr_ios"]),
        aqu_sz=aqu_sz(d["rq_ticks"], dt),
        rareq_sz=areq_sz_kb(d["rd_sectors"], d["rd_ios"]),
        wareq_sz=areq_sz_kb(d["wr_sectors"], d["wr_ios"]),
        util=util_percent(d["io_ticks"], dt),
        in_flight=cur.in_flight,
        rrqm_pct=merge_percent(d["rd_merges"], d["rd_ios"]),
        wrqm_pct=merge_percent(d["wr_merges"], d["wr_ios"]),
        read_bytes=d["rd_sectors"] * SECTOR_BYTES,
        write_bytes=d["wr_sectors"] * SECTOR_BYTES,
    )
    if "dc_ios" in d:
        fig.d_s = per_second(d["dc_ios"], dt)
        fig.dmb_s = mb_per_second(d["dc_sectors"], dt)
        fig.drqm_s = per_second(d["dc_merges"], dt)
        fig.drqm_pct = merge_percent(d["dc_merges"], d["dc_ios"])
        fig.d_await = await_ms(d["dc_ticks"], d["dc_ios"])
        fig.dareq_sz = areq_sz_kb(d["dc_sectors"], d["dc_ios"])
    if "fl_ios" in d:
        fig.f_s = per_second(d["fl_ios"], dt)
        fig.f_await = await_ms(d["fl_ticks"], d["fl_ios"])
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
