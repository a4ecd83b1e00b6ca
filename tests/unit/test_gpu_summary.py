"""GPU interval summary from >= 10 Hz samples, and the no-NVML path."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo.collectors.gpu import GpuCollector, pulsing_of, summarise
from diskinfo.record import IntervalRecord
from diskinfo.sources.nvml import GpuSample, Nvml


def samples(utils, **kw):
    return [
        GpuSample(t=i / 10, util=u, mem_used_mb=1000 + i, mem_total_mb=80000, **kw)
        for i, u in enumerate(utils)
    ]


def test_steady_busy_gpu_is_not_pulsing():
    fig = summarise(0, "H200", samples([98, 100, 99, 100] * 10, power_w=600.0))
    assert fig.util_mean == pytest.approx(99.25)
    assert fig.util_min == 98 and fig.util_max == 100
    assert fig.idle_fraction == 0.0 and fig.pulsing == 0.0 and fig.bursts == 0
    assert fig.power_w == pytest.approx(600.0) and fig.samples == 40
    assert fig.mem_used_mb == 1039 and fig.mem_total_mb == 80000


def test_bursts_between_idle_gaps_pulse():
    # 0.5 s flat out, 0.5 s waiting for data, five times: same mean as a half-busy GPU
    pulsing = summarise(0, "", samples(([100] * 5 + [0] * 5) * 5))
    half = summarise(0, "", samples([50] * 50))
    assert pulsing.util_mean == pytest.approx(half.util_mean)
    assert pulsing.pulsing == pytest.approx(1.0) and pulsing.bursts == 5
    assert pulsing.idle_fraction == pytest.approx(0.5) and pulsing.util_min == 0
    assert half.pulsing == 0.0 and half.idle_fraction == 0.0


def test_short_bursts_in_long_gaps_pulse_less_but_are_idle():
    fig = summarise(0, "", samples(([100] * 1 + [0] * 9) * 5))
    assert 0.1 < fig.pulsing < 0.3 and fig.bursts == 5 and fig.idle_fraction == pytest.approx(0.9)


def test_one_transition_is_not_a_pulse():
    assert pulsing_of([100] * 10 + [0] * 10) == (0.0, 1)


def test_pcie_only_where_read():
    s = samples([100, 100, 100])
    s[0] = GpuSample(
        t=0, util=100, mem_used_mb=1, mem_total_mb=2, pcie_rx_mb_s=300.0, pcie_tx_mb_s=10.0
    )
    fig = summarise(1, "", s)
    assert fig.pcie_rx_mb_s == 300.0 and fig.pcie_tx_mb_s == 10.0 and fig.index == 1


def test_no_samples_gives_empty_figures():
    fig = summarise(0, "x", [])
    assert fig.samples == 0 and fig.util_mean == 0.0


@given(st.lists(st.floats(0, 100), min_size=1, max_size=300))
def test_summary_is_bounded(utils):
    fig = summarise(0, "", samples(utils))
    assert 0.0 <= fig.idle_fraction <= 1.0
    assert 0.0 <= fig.pulsing <= 1.0
    assert fig.util_min <= fig.util_mean + 1e-9 <= fig.util_max + 2e-9


def test_without_nvml_the_monitor_says_so_once_and_carries_on():
    collector = GpuCollector(open_source=lambda: (None, "NVML unavailable: no library"))
    collector.start()
    records = [IntervalRecord(ts=0, elapsed_s=1) for _ in range(3)]
    for r in records:
        collector.fill(r)
    collector.stop()
    assert [r.gpus for r in records] == [None, None, None]
    assert [len(r.warnings) for r in records] == [1, 0, 0]
    assert "no GPU figures" in records[0].warnings[0]


def test_real_nvml_open_on_this_machine_fails_cleanly_or_works():
    nvml, reason = Nvml.open()
    if nvml is None:
        assert reason  # one plain line for the log
    else:
        assert nvml.handles and nvml.sample(0).mem_total_mb > 0
        nvml.close()


class _FakeNvml:
    """Stands in for the driver only: the sampler thread and its interval hand-off are real."""

    def __init__(self):
        self.handles = [object()]
        self.names = ["fake"]
        self.uuids = ["GPU-fake"]
        self.n = 0

    def utilisation_samples(self, index):
        raise RuntimeError("no driver samples: polled")

    def processes(self, index):
        return None

    def sample(self, index, with_pcie=False, with_util=True):
        self.n += 1
        return GpuSample(
            t=time.monotonic(),
            util=100.0 if self.n % 4 < 2 else 0.0,
            mem_used_mb=1,
            mem_total_mb=2,
            pcie_rx_mb_s=5.0 if with_pcie else None,
        )

    def close(self):
        pass


def test_sampler_runs_at_least_10_hz_and_hands_over_per_interval():
    collector = GpuCollector(hz=20, open_source=lambda: (_FakeNvml(), ""))
    collector.start()
    time.sleep(1.0)
    first = IntervalRecord(ts=0, elapsed_s=1.0)
    collector.fill(first)
    time.sleep(0.5)
    second = IntervalRecord(ts=0, elapsed_s=0.5)
    collector.fill(second)
    collector.stop()
    assert first.gpus[0].samples >= 15  # 20 Hz for 1 s, with slack for a loaded machine
    assert 5 <= second.gpus[0].samples <= 12  # nothing counted twice
    assert first.gpus[0].pulsing > 0.5 and first.gpus[0].pcie_rx_mb_s == 5.0


class _DriverKeepsSamples(_FakeNvml):
    """A driver with samples of its own (one at 30% per call), or keeping none at all."""

    def __init__(self, kept: bool):
        super().__init__()
        self.kept = kept

    def utilisation_samples(self, index):
        return [(1, 30.0)] if self.kept else []


@pytest.mark.parametrize("kept", [True, False])
def test_driver_samples_are_used_and_polled_ones_stand_in_when_it_kept_none(kept):
    collector = GpuCollector(hz=20, open_source=lambda: (_DriverKeepsSamples(kept), ""))
    collector.start()
    time.sleep(0.6)
    record = IntervalRecord(ts=0, elapsed_s=0.6)
    collector.fill(record)
    collector.stop()
    gpu = record.gpus[0]
    assert gpu.samples >= 3  # 20 Hz for 0.6 s, with slack for a loaded machine
    if kept:  # the driver's 30% samples, not the polled 100/0 readings
        assert gpu.util_mean == 30.0 and gpu.pulsing == 0.0
    else:
        assert gpu.util_max == 100.0 and gpu.pulsing > 0.5
