"""analyse/pressure.py: node pressure (a pure function), and `diskinfo status` against a real
exporter over HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo.analyse.pressure import LEVELS, STATES, device_await_ms, node_pressure, redact
from diskinfo.commands.status import default_url
from diskinfo.errors import UserError
from diskinfo.record import DeviceFigures, NfsFigures
from diskinfo.sinks.prometheus import PrometheusSink
from tests.helpers.records import record as rec


@pytest.mark.parametrize(
    ("dev", "state", "why"),
    [
        (DeviceFigures("vda"), "ok", "below"),
        (DeviceFigures("vda", r_s=50, r_await=1.0, util=30), "ok", "below"),
        (DeviceFigures("vda", util=70), "busy", "%util 70.0% >= 50%"),
        (DeviceFigures("vda", r_s=10, r_await=25), "busy", "await 25.0 ms >= 20 ms"),
        (DeviceFigures("vda", util=95.0), "saturated", "%util 95.0% >= 95%"),
        (DeviceFigures("vda", r_s=10, r_await=80, w_s=10, w_await=20), "saturated", "50.0 ms"),
        # one slow request in an otherwise idle interval is not pressure
        (DeviceFigures("vda", r_s=0.2, r_await=900), "ok", "below"),
    ],
)
def test_device_pressure(dev, state, why):
    p = node_pressure(rec(dev))
    assert p.state == state
    assert any(why in e for e in p.evidence), p.evidence


def test_worst_device_nfs_and_verdict_decide():
    calm, hot = DeviceFigures("vda", util=10), DeviceFigures("vdb", util=99)
    p = node_pressure(rec(calm, hot))
    assert p.state == "saturated" and p.evidence == ["vdb: %util 99.0% >= 95%"]
    slow = NfsFigures("/mnt/nas", "nas", read_ops_s=5, read_rtt_ms=70)
    assert node_pressure(rec(calm, nfs=[slow])).state == "saturated"
    assert node_pressure(rec(calm, verdict="input-bound: disk")).state == "saturated"
    assert node_pressure(rec(calm, verdict="input-bound: cpu")).state == "ok"


def test_unknown_without_a_fresh_record():
    assert node_pressure(None).state == "unknown"
    now = time.time()
    old = rec(DeviceFigures("vda", util=99), ts=now - 100, elapsed=5.0)
    p = node_pressure(old, now)
    assert p.state == "unknown" and "100 s old" in p.evidence[0]
    assert node_pressure(old).state == "saturated"  # without `now`: no staleness check


@given(
    util=st.floats(0, 100),
    more=st.floats(0, 100),
    r_s=st.floats(0, 1e5),
    r_await=st.floats(0, 1e4),
)
def test_more_load_never_lowers_pressure(util, more, r_s, r_await):
    a = node_pressure(rec(DeviceFigures("vda", util=util, r_s=r_s, r_await=r_await)))
    b = node_pressure(
        rec(DeviceFigures("vda", util=min(100, util + more), r_s=r_s, r_await=r_await + more))
    )
    assert a.state in STATES and b.state in STATES
    assert LEVELS.index(b.state) >= LEVELS.index(a.state)


def test_await_is_weighted_by_requests():
    assert device_await_ms(DeviceFigures("vda", r_s=3, r_await=10, w_s=1, w_await=50)) == 20
    assert device_await_ms(DeviceFigures("vda")) == 0


@pytest.mark.parametrize(
    ("source", "clean"),
    [
        ("nas:/export", "nas:/export"),
        ("alice@nas:/export", "nas:/export"),
        ("//bob:hunter2@files/share", "//files/share"),
        ("10.1.2.3:/data", "10.1.2.3:/data"),
    ],
)
def test_redact_drops_credentials(source, clean):
    assert redact(source) == clean


def test_default_url_follows_the_image_variables():
    assert default_url({}) == "http://127.0.0.1:9101/status"
    assert default_url({"METRICS_PORT": "9200"}) == "http://127.0.0.1:9200/status"
    assert default_url({"METRICS_ADDR": "0.0.0.0"}) == "http://127.0.0.1:9101/status"
    assert default_url({"METRICS_ADDR": "::"}) == "http://[::1]:9101/status"
    assert default_url({"DISKINFO_STATUS_URL": "http://x:1/status"}) == "http://x:1/status"
    with pytest.raises(UserError):
        default_url({"METRICS_PORT": "0"})


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", "status", *args],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_status_command_prints_json_and_fails_on_pressure():
    sink = PrometheusSink(0)
    try:
        url = f"http://127.0.0.1:{sink.port}/status"
        sink.write(rec(DeviceFigures("vda", util=70)))
        out = cli("--url", url)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["pressure"] == "busy"
        assert cli("--url", url, "--fail-on", "saturated").returncode == 0
        assert cli("--url", url, "--fail-on", "busy").returncode == 3
        sink.write(rec(DeviceFigures("vda", util=99)))
        out = cli("--url", url, "--fail-on", "saturated")
        assert out.returncode == 3 and json.loads(out.stdout)["pressure"] == "saturated"
    finally:
        sink.close()
    out = cli("--url", url, "--timeout", "2")  # the monitor is gone now
    assert out.returncode == 1 and out.stdout == ""
    assert out.stderr.startswith("diskinfo: error: monitor not reachable at")
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
