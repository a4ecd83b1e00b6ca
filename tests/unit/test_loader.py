"""The loader-state contract and the monitor's per-interval sum over training processes."""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo import loader_state
from diskinfo.collectors.loader import LoaderCollector, interval_figures
from diskinfo.loader_state import LoaderCounters
from diskinfo.record import IntervalRecord


def c(pid: int, batches: int, wait: float, step: float, errors: int = 0) -> LoaderCounters:
    return LoaderCounters(pid=pid, batches=batches, wait_s=wait, step_s=step, worker_errors=errors)


def test_encode_decode_round_trip_and_unknown_keys_ignored():
    counters = c(42, 10, 1.5, 3.5, 1)
    counters.num_workers = 4
    data = json.loads(loader_state.encode(counters))
    data["from_a_newer_writer"] = [1, 2]
    assert loader_state.decode(json.dumps(data)) == counters


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "[]",
        '{"schema": "other/1", "pid": 1}',
        '{"schema": "diskinfo.loader/1"}',
        '{"schema": "diskinfo.loader/1", "pid": "x"}',
    ],
)
def test_decode_rejects_what_is_not_a_loader_state(text):
    with pytest.raises(ValueError):
        loader_state.decode(text)


@given(st.text(max_size=200))
def test_decode_never_raises_anything_but_value_error(text):
    with contextlib.suppress(ValueError):
        loader_state.decode(text)


def test_write_is_atomic_and_read_skips_junk(tmp_path):
    loader_state.write_state(tmp_path, c(7, 3, 0.2, 0.8))
    (tmp_path / "loader-8.json").write_text("{half")
    (tmp_path / "unrelated.json").write_text("{}")
    states = loader_state.read_states(tmp_path)
    assert list(states) == [7] and states[7].batches == 3
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


def test_state_dir_env_wins(monkeypatch, tmp_path):
    monkeypatch.setenv(loader_state.STATE_DIR_ENV, str(tmp_path))
    assert loader_state.state_dir() == tmp_path
    monkeypatch.delenv(loader_state.STATE_DIR_ENV)
    assert loader_state.state_dir().name.startswith("diskinfo")


def test_interval_sums_deltas_over_processes():
    prev = {1: c(1, 10, 1.0, 4.0), 2: c(2, 5, 0.5, 2.0)}
    cur = {1: c(1, 20, 3.0, 6.0), 2: c(2, 5, 0.5, 2.0), 3: c(3, 4, 1.0, 1.0, 2)}
    fig = interval_figures(prev, cur, elapsed_s=2.0)
    assert fig is not None
    assert fig.batches == 14 and fig.processes == 2  # pid 2 did nothing, pid 3 is new
    assert fig.wait_s == pytest.approx(3.0) and fig.step_s == pytest.approx(3.0)
    assert fig.wait_share == pytest.approx(0.5)
    assert fig.batches_s == pytest.approx(7.0)
    assert fig.worker_errors == 2


def test_epochs_and_their_start_waits_are_summed_over_processes():
    prev = {1: replace(c(1, 10, 1.0, 4.0), epochs=2, start_wait_s=0.5)}
    cur = {
        1: replace(c(1, 20, 3.0, 6.0), epochs=5, start_wait_s=1.7),
        2: replace(c(2, 4, 1.0, 1.0), epochs=1, start_wait_s=0.25),  # new: counts from zero
    }
    fig = interval_figures(prev, cur, elapsed_s=2.0)
    assert fig is not None and fig.epochs == 4
    assert fig.start_wait_s == pytest.approx(1.2 + 0.25)


def test_pid_reuse_counts_from_zero_never_negative():
    fig = interval_figures({1: c(1, 100, 50.0, 50.0)}, {1: c(1, 3, 1.0, 2.0)}, 1.0)
    assert fig.batches == 3 and fig.wait_s == pytest.approx(1.0)


def test_no_publisher_means_no_loader_figures():
    assert interval_figures({}, {}, 1.0) is None
    idle = interval_figures({1: c(1, 5, 1, 1)}, {1: c(1, 5, 1, 1)}, 1.0)
    assert idle is not None and idle.processes == 0 and idle.wait_share == 0.0


@given(
    st.lists(
        st.tuples(st.integers(0, 10**6), st.floats(0, 1e5), st.floats(0, 1e5)),
        min_size=2,
        max_size=2,
    )
)
def test_interval_figures_are_never_negative(pair):
    (b1, w1, s1), (b2, w2, s2) = pair
    fig = interval_figures({1: c(1, b1, w1, s1)}, {1: c(1, b2, w2, s2)}, 1.0)
    assert fig.batches >= 0 and fig.wait_s >= 0 and fig.step_s >= 0
    assert 0.0 <= fig.wait_share <= 1.0


def test_collector_ignores_history_before_start(tmp_path):
    loader_state.write_state(tmp_path, c(11, 100, 10.0, 10.0))
    collector = LoaderCollector(tmp_path)
    collector.start()
    loader_state.write_state(tmp_path, c(11, 110, 11.0, 13.0))
    record = IntervalRecord(ts=0, elapsed_s=1.0)
    collector.fill(record)
    assert record.loader.batches == 10
    assert record.loader.wait_share == pytest.approx(0.25)


def test_files_left_by_dead_processes_are_no_training_loop(tmp_path):
    loader_state.write_state(tmp_path, c(999_999_1, 5, 1.0, 1.0))
    alive = {999_999_2}
    collector = LoaderCollector(tmp_path, alive=lambda pid: pid in alive)
    collector.start()
    record = IntervalRecord(ts=0, elapsed_s=1.0)
    collector.fill(record)
    assert record.loader is None
    loader_state.write_state(tmp_path, c(999_999_2, 3, 0.5, 0.5))
    alive.discard(999_999_2)  # published its final figures, then exited
    record = IntervalRecord(ts=0, elapsed_s=1.0)
    collector.fill(record)
    assert record.loader is not None and record.loader.batches == 3
    record = IntervalRecord(ts=0, elapsed_s=1.0)
    collector.fill(record)
    assert record.loader is None


def test_read_states_cache_rereads_only_changed_files(tmp_path, monkeypatch):
    loader_state.write_state(tmp_path, LoaderCounters(pid=11, batches=1))
    loader_state.write_state(tmp_path, LoaderCounters(pid=12, batches=5))
    decoded: list[str] = []
    real = loader_state.decode
    monkeypatch.setattr(loader_state, "decode", lambda text: decoded.append(text) or real(text))
    cache: dict = {}
    assert {p: c.batches for p, c in loader_state.read_states(tmp_path, cache).items()} == {
        11: 1,
        12: 5,
    }
    assert len(decoded) == 2
    decoded.clear()
    time.sleep(0.01)
    loader_state.write_state(tmp_path, LoaderCounters(pid=11, batches=2))
    states = loader_state.read_states(tmp_path, cache)
    assert states[11].batches == 2 and states[12].batches == 5
    assert len(decoded) == 1  # only the rewritten file was read again
    loader_state.state_path(tmp_path, 12).unlink()
    assert set(loader_state.read_states(tmp_path, cache)) == {11}
    assert set(cache) == {"loader-11.json"}


def test_state_reader_sees_every_publish_and_skips_an_unchanged_directory(tmp_path, monkeypatch):
    """Publishes land by rename: one right after a listing is seen at the next call; an
    unchanged, settled directory is not listed again."""
    reader = loader_state.StateReader()
    assert reader(tmp_path) == {}
    for batches in range(1, 6):  # publishes right after each listing, within one clock tick
        loader_state.write_state(tmp_path, LoaderCounters(pid=11, batches=batches))
        assert reader(tmp_path)[11].batches == batches
    old = time.time() - 10
    os.utime(tmp_path, (old, old))  # settled long ago
    assert reader(tmp_path)[11].batches == 5
    listed = []
    monkeypatch.setattr(loader_state, "read_states", lambda *a: listed.append(a) or {})
    assert reader(tmp_path)[11].batches == 5 and not listed  # not listed again
    loader_state.write_state(tmp_path, LoaderCounters(pid=11, batches=6))
    reader(tmp_path)
    assert listed  # changed: listed


def test_a_loader_wrapped_but_never_iterated_is_counted_not_given_figures(tmp_path):
    """`watch` publishes zeros at once; while no process has iterated a loader, the record
    has no loop figures and counts the processes that wrapped one."""
    collector = LoaderCollector(tmp_path, alive=lambda pid: True)
    collector.start()
    loader_state.write_state(tmp_path, LoaderCounters(pid=11))
    loader_state.write_state(tmp_path, LoaderCounters(pid=12))
    record = IntervalRecord(ts=0, elapsed_s=1.0)
    collector.fill(record)
    assert record.loader is None and record.wrapped_not_iterated == 2
    loader_state.write_state(tmp_path, c(12, 0, 0.4, 0.0))  # rank 12's loop began: it waits
    record = IntervalRecord(ts=0, elapsed_s=1.0)
    collector.fill(record)
    assert record.wrapped_not_iterated == 0 and record.loader is not None
    assert record.loader.processes == 1 and record.loader.wait_s == pytest.approx(0.4)
