"""The monitor reads a folder the training's user writes: whatever is planted there (a FIFO, a
link, a flood, a field of the wrong type with escape sequences in it) is skipped, never read
into the record or the log, and never blocks the sampling loop."""

from __future__ import annotations

import json
import os
import threading

from diskinfo.loader_state import LoaderCounters, encode, read_states, state_path


def _good(directory, pid: int = 7) -> None:
    state_path(directory, pid).write_text(encode(LoaderCounters(pid=pid, batches=3)))


def _read_within(directory, seconds: float = 5.0) -> dict:
    """read_states in a thread: a test of a hang must end even when the code hangs."""
    out: dict = {}
    reader = threading.Thread(target=lambda: out.update(read_states(directory)), daemon=True)
    reader.start()
    reader.join(seconds)
    assert not reader.is_alive(), "read_states blocked"
    return out


def test_a_fifo_named_like_a_state_never_blocks_the_monitor(tmp_path):
    os.mkfifo(tmp_path / "loader-1.json")
    _good(tmp_path)
    assert list(_read_within(tmp_path)) == [7]


def test_links_and_oversized_files_are_skipped(tmp_path):
    _good(tmp_path, 8)
    (tmp_path / "loader-9.json").symlink_to(tmp_path / "loader-8.json")
    big = json.loads(encode(LoaderCounters(pid=10)))
    big["padding"] = "x" * 100_000
    (tmp_path / "loader-10.json").write_text(json.dumps(big))
    assert list(_read_within(tmp_path)) == [8]


def test_fields_of_the_wrong_type_are_refused(tmp_path):
    bad = {
        11: {"num_workers": "\x1b[31m8 workers\x1b[0m"},
        12: {"batches": "3"},
        13: {"pin_memory": "yes"},
        14: {"wait_s": True},
        15: {"prefetch_factor": 2.5},
        16: {"pid": None},
    }
    for pid, fields in bad.items():
        state = {**json.loads(encode(LoaderCounters(pid=pid))), **fields}
        (tmp_path / f"loader-{pid}.json").write_text(json.dumps(state))
    _good(tmp_path, 17)
    state = {**json.loads(encode(LoaderCounters(pid=18))), "num_workers": 4, "pin_memory": None}
    (tmp_path / "loader-18.json").write_text(json.dumps(state))
    assert sorted(_read_within(tmp_path)) == [17, 18]


def test_a_state_nested_past_the_parser_hides_no_other_loader(tmp_path):
    # 60,000 `[` fit in the size cap and raised RecursionError, which ended the whole read:
    # every loader's figures were gone while the file was there
    (tmp_path / "loader-19.json").write_text("[" * 60_000)
    (tmp_path / "loader-20.json").write_text('{"schema": "diskinfo.loader/1", "pid": ' * 30_000)
    _good(tmp_path, 21)
    assert list(_read_within(tmp_path)) == [21]
