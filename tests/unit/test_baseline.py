"""The device-baseline store and the O_DIRECT readers of `diskinfo bench`."""

from __future__ import annotations

import contextlib
import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo import baseline
from diskinfo.baseline import BaselineCache, DeviceBaseline
from diskinfo.commands.bench import parse_size
from diskinfo.errors import UserError


def test_save_merges_by_device_and_load_reads_back(tmp_path):
    store = tmp_path / "sub" / "baseline.json"
    baseline.save([DeviceBaseline("vda", 1000.0, 9000.0)], store)
    baseline.save([DeviceBaseline("nvme0n1", 3000.0, 50000.0)], store)
    baseline.save([DeviceBaseline("vda", 1100.0, 9500.0)], store)
    loaded = baseline.load(store)
    assert sorted(loaded) == ["nvme0n1", "vda"] and loaded["vda"].seq_read_mb_s == 1100.0
    assert json.loads(store.read_text())["schema"] == baseline.SCHEMA


def test_missing_or_broken_store_means_no_baseline(tmp_path):
    assert baseline.load(tmp_path / "none.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    assert baseline.load(tmp_path / "bad.json") == {}
    (tmp_path / "odd.json").write_text('{"devices": {"vda": {"seq_read_mb_s": "x"}, "sdb": 3}}')
    assert baseline.load(tmp_path / "odd.json") == {}


@given(st.text(max_size=200))
def test_parse_fuzz(text):
    with contextlib.suppress(ValueError):
        baseline.parse(text)


def test_default_path_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(baseline.BASELINE_ENV, str(tmp_path / "b.json"))
    assert baseline.default_path() == tmp_path / "b.json"
    monkeypatch.delenv(baseline.BASELINE_ENV)
    monkeypatch.setenv("DISKINFO_STATE_DIR", str(tmp_path))
    assert baseline.default_path() == tmp_path / "baseline.json"
    monkeypatch.delenv("DISKINFO_STATE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert baseline.default_path() == tmp_path / "cache" / "diskinfo" / "baseline.json"


def test_cache_rereads_only_when_the_file_changes(tmp_path):
    store = tmp_path / "baseline.json"
    cache = BaselineCache(store)
    assert cache() == {}
    baseline.save([DeviceBaseline("vda", 1000.0, 9000.0)], store)
    assert cache()["vda"].seq_read_mb_s == 1000.0
    first = cache()
    assert cache() is first  # unchanged file: no re-read
    os.unlink(store)
    assert cache() == {}


def test_direct_readers_on_a_real_file(tmp_path):
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(4 << 20))
    seq = baseline.sequential_read(str(path), 0.2)
    rand = baseline.random_read(str(path), 0.2)
    assert seq.nbytes >= 4 << 20 and seq.mb_s > 0  # wrapped around the 4 MiB file
    assert rand.ios > 10 and rand.iops > 0 and rand.nbytes == rand.ios * 4096


def test_direct_io_refused_is_a_user_error(monkeypatch, tmp_path):
    # filesystems without O_DIRECT answer EINVAL (tmpfs before Linux 6.6, some FUSE)
    import errno

    def refuse(path, flags, *args):
        raise OSError(errno.EINVAL, "Invalid argument", path)

    monkeypatch.setattr(baseline.os, "open", refuse)
    with pytest.raises(UserError, match="does not support direct I/O"):
        baseline.sequential_read(str(tmp_path / "x"), 0.1)


@pytest.mark.parametrize(
    ("text", "value"),
    [("512M", 512 << 20), ("1G", 1 << 30), ("2MiB", 2 << 20), ("1048576", 1 << 20)],
)
def test_sizes(text, value):
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1k", "-5M"])
def test_bad_sizes(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        parse_size(text)
