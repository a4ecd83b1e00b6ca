"""diskinfo.logfiles: the log folder's file names exist once. What the sinks, the lock and the
baseline store write in a log folder is exactly what the image's start-up hands to NB_USER
(safe_paths.PROJECT_LOG), and the banner names the baseline where the store keeps it."""

from __future__ import annotations

import os

from diskinfo import logfiles
from diskinfo.analyse import baseline
from diskinfo.logdir_lock import LogDirLock
from diskinfo.sinks.jsonl import JsonlSink
from diskinfo.sinks.textlog import TextLogSink
from diskinfo.sources.blockid import DeviceIdentity
from tests.helpers.records import record
from tests.helpers.scripts import load

safe_paths = load("shared/safe_paths.py")
banner = load("start/banner.py")


def test_what_the_sinks_write_is_what_start_up_hands_over(tmp_path, monkeypatch):
    monkeypatch.setenv("LOG_DIR", str(tmp_path))
    monkeypatch.delenv("DISKINFO_BASELINE", raising=False)
    lock = LogDirLock(str(tmp_path))
    sinks = [TextLogSink(str(tmp_path)), JsonlSink(str(tmp_path), max_bytes=200)]
    for _ in range(3):  # past max_bytes: rotated copies too
        for sink in sinks:
            sink.write(record())
    for sink in sinks:
        sink.close()
    lock.close()
    disk = DeviceIdentity(model="m", serial="s", size_bytes=2**30)
    baseline.save([baseline.DeviceBaseline("vda", 100.0, 1000.0, identity=disk)])
    written = set(os.listdir(tmp_path))
    assert {logfiles.TEXT_LOG, logfiles.JSONL, logfiles.LOCK, logfiles.BASELINE} <= written
    assert f"{logfiles.JSONL}.1" in written
    assert all(safe_paths.PROJECT_LOG.fullmatch(name) for name in written), written
    assert not safe_paths.PROJECT_LOG.fullmatch("diskinfo.jsonl.bak")


def test_banner_names_the_baseline_where_the_store_keeps_it():
    env = {"LOG_DIR": "/workspace/logs"}
    assert banner.baseline_path(env, "/workspace/logs") == str(baseline.default_path(env))
    own = {"DISKINFO_BASELINE": "/data/b.json"}
    assert banner.baseline_path(own, "/l") == "/data/b.json" == str(baseline.default_path(own))


def test_the_log_folder_is_the_dockerfiles():
    """The Dockerfile cannot import it: the image's ENV LOG_DIR must say the same folder."""
    import re

    from diskinfo.logfiles import LOG_DIR
    from tests.helpers import ROOT

    found = re.findall(r"\bLOG_DIR=(\S+)", (ROOT / "Dockerfile").read_text())
    assert found == [LOG_DIR]
