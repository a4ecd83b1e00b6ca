"""The iostat formulas, counter wrap and reset (never a negative or absurd rate)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo.collectors import rates
from diskinfo.sources.diskstats import ALL_FIELDS, DiskCounters, parse_line

PREV = parse_line(
    "259 0 nvme0n1 1000 10 80000 500 2000 100 160000 4000 0 10000 20000 50 5 4000 25 300 60"
)
CUR = parse_line(
    "259 0 nvme0n1 5000 50 1104000 2500 2500 150 200000 5500 3 10950 28000 60 7 4800 35 310 80"
)


def test_every_figure_as_iostat_computes_it():
    f = rates.figures(PREV, CUR, 2.0)
    assert f.r_s == 2000.0 and f.w_s == 250.0
    assert f.rmb_s == pytest.approx(1024000 / 2048 / 2)  # 250 MB/s with MB = 2**20
    assert f.wmb_s == pytest.approx(40000 / 2048 / 2)
    assert f.rrqm_s == 20.0 and f.wrqm_s == 25.0
    assert f.rrqm_pct == pytest.approx(40 / 4040 * 100)
    assert f.wrqm_pct == pytest.approx(50 / 550 * 100)
    assert f.r_await == pytest.approx(2000 / 4000) and f.w_await == pytest.approx(1500 / 500)
    assert f.rareq_sz == pytest.approx(1024000 / 4000 / 2)  # 128 kB
    assert f.wareq_sz == pytest.approx(40000 / 500 / 2)
    assert f.aqu_sz == pytest.approx(8000 / 2.0 / 1000)
    assert f.util == pytest.approx(950 / 2.0 / 10)  # 47.5 %
    assert f.in_flight == 3
    assert f.d_s == 5.0 and f.drqm_s == 1.0 and f.d_await == pytest.approx(10 / 10)
    assert f.dmb_s == pytest.approx(800 / 2048 / 2) and f.dareq_sz == pytest.approx(800 / 10 / 2)
    assert f.f_s == 5.0 and f.f_await == pytest.approx(2.0)
    assert (f.read_bytes, f.write_bytes) == (1024000 * 512, 40000 * 512)


def test_no_io_gives_zero_ratios_not_nan():
    f = rates.figures(PREV, PREV, 1.0)
    for name in ("r_await", "w_await", "rareq_sz", "wareq_sz", "rrqm_pct", "f_await", "d_await"):
        assert getattr(f, name) == 0.0


def test_no_discard_or_flush_on_old_kernels():
    old = parse_line("8 0 sda 1 0 8 1 0 0 0 0 0 1 1")
    new = parse_line("8 0 sda 2 0 16 2 0 0 0 0 0 2 2")
    f = rates.figures(old, new, 1.0)
    assert f.d_s is None and f.f_s is None and f.r_s == 1.0


def test_32_bit_time_counter_wraps():
    prev = PREV._replace(rd_ticks=2**32 - 100, io_ticks=2**32 - 10)
    cur = CUR._replace(rd_ticks=1900, io_ticks=940)
    f = rates.figures(prev, cur, 2.0)
    assert f.r_await == pytest.approx(2000 / 4000) and f.util == pytest.approx(47.5)


def test_32_bit_count_wraps_on_a_32_bit_kernel():
    assert rates.counter_delta(2**32 - 10, 5, 64, 1e9) == 15
    assert rates.counter_delta(2**64 - 10, 5, 64, 1e9) == 15


def test_reset_is_not_a_wrap():
    # a device removed and re-added starts again from small numbers
    assert rates.counter_delta(5_000_000_000_000, 10, 64, 1e9) is None
    assert rates.counter_delta(3_000_000, 10, 32, 1e6) is None
    reset = CUR._replace(rd_ios=3, rd_sectors=24)
    assert rates.figures(CUR, reset, 1.0) is None


def test_absurd_jump_is_a_reset():
    jump = CUR._replace(rd_ios=CUR.rd_ios + 10**12)
    assert rates.figures(CUR, jump, 1.0) is None


counters = st.builds(
    lambda vals: DiskCounters(8, 0, "sda", *vals),
    st.tuples(
        *[st.integers(0, 2**32 - 1 if n.endswith("_ticks") else 2**64 - 1) for n in ALL_FIELDS]
    ),
)


@given(counters, counters, st.floats(min_value=0.001, max_value=3600))
def test_figures_are_never_negative_or_absurd(prev, cur, dt):
    f = rates.figures(prev, cur, dt)
    if f is None:
        return
    per_s = max(dt, 1.0) / dt
    for field in dataclasses.fields(f):
        value = getattr(f, field.name)
        if isinstance(value, float):
            assert math.isfinite(value) and value >= 0, field.name
    assert f.r_s <= rates._MAX_OPS_S * per_s + 1 / dt
    assert f.rmb_s <= rates._MAX_SECTORS_S / 2048 * per_s + 1
    assert 0 <= f.rrqm_pct <= 100
