"""The exporter's /metrics and /status over real HTTP, parsed with prometheus_client's parser."""

from __future__ import annotations

import json
import re
import socket
import time
import urllib.error
import urllib.request

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from diskinfo.errors import UserError
from diskinfo.record import (
    DeviceFigures,
    IntervalRecord,
    NfsFigures,
    Verdict,
)
from diskinfo.sinks.prometheus import (
    SPECS,
    PrometheusSink,
    RecordCollector,
    _Totals,
    markdown_table,
)
from diskinfo.sinks.prometheus.exposition import render
from tests.helpers.docs import generated
from tests.helpers.exposition import reference_text
from tests.helpers.records import DISKSTATS, full_record
from tests.helpers.scrape import families
from tests.helpers.scrape import get as scrape_get

SECRET = "s3cr3t-T0KEN-4f9a"  # planted wherever a careless exporter might copy text from


@pytest.fixture
def sink():
    s = PrometheusSink(0, "127.0.0.1")
    yield s
    s.close()


def get(sink: PrometheusSink, path: str) -> tuple[int, str, str]:
    return scrape_get(sink.port, path)


def scrape(sink: PrometheusSink) -> tuple[dict[str, object], str]:
    """(families by name, the text) of one scrape."""
    status, ctype, text = get(sink, "/metrics")
    assert status == 200 and ctype.startswith("text/plain")
    return families(text), text


def samples(families, name: str) -> dict[tuple, float]:
    family_name = name.removesuffix("_total")
    fam = families[family_name]
    return {tuple(sorted(s.labels.items())): s.value for s in fam.samples if s.name == name}


def test_every_declared_metric_is_served_with_help_type_and_units(sink):
    sink.write(full_record(SECRET))
    families, _ = scrape(sink)
    served = {}
    for fam in families.values():
        if fam.name.startswith("process_"):
            continue
        for s in fam.samples:
            served[s.name] = fam
    assert set(served) == set(SPECS), "served and declared metrics differ"
    for name, spec in SPECS.items():
        fam = served[name]
        assert fam.type == spec.kind
        assert fam.documentation and fam.documentation == spec.help
        assert re.fullmatch(r"diskinfo_[a-z0-9_]+", name)
        if spec.kind == "counter":
            assert name.endswith("_total")
        # base units only: no ms, MB, percent in names
        assert not re.search(r"_(ms|mb|kb|percent|pct)(_|$)", name), name
        timed = re.search(r"time|await|rtt|execute|interval_seconds", name)
        if timed and "timestamp" not in name and "retransmissions" not in name:
            assert re.search(r"_seconds(_total)?$", name), name
        for s in fam.samples:
            if s.name == name:
                assert set(s.labels) == set(spec.labels), name


def test_counters_are_the_raw_kernel_values_in_base_units(sink):
    sink.write(full_record(SECRET))
    f, _ = scrape(sink)
    dev = (("device", "nvme0n1"),)
    assert samples(f, "diskinfo_disk_reads_completed_total")[dev] == 1000
    assert samples(f, "diskinfo_disk_read_bytes_total")[dev] == 2048 * 512
    assert samples(f, "diskinfo_disk_written_bytes_total")[dev] == 4096 * 512
    assert samples(f, "diskinfo_disk_read_time_seconds_total")[dev] == pytest.approx(1.5)
    assert samples(f, "diskinfo_disk_io_time_seconds_total")[dev] == pytest.approx(9.0)
    assert samples(f, "diskinfo_disk_io_time_weighted_seconds_total")[dev] == pytest.approx(12.0)
    assert samples(f, "diskinfo_disk_flush_requests_total")[dev] == 40
    assert samples(f, "diskinfo_disk_io_now")[dev] == 3
    # interval gauges: iostat units converted to base units
    assert samples(f, "diskinfo_disk_read_bytes_per_second")[dev] == 50 * 2**20
    assert samples(f, "diskinfo_disk_read_await_seconds")[dev] == pytest.approx(0.004)
    assert samples(f, "diskinfo_disk_utilization_ratio")[dev] == pytest.approx(0.97)
    assert samples(f, "diskinfo_disk_read_request_size_bytes")[dev] == 512 * 1024
    paths = samples(f, "diskinfo_watched_path_info")
    assert set(paths) == {
        (("device", "nvme0n1"), ("path", "/workspace/data")),
        (("device", "nvme0n1"), ("path", "/workspace/ckpt")),
    }
    nfs = samples(f, "diskinfo_nfs_read_rtt_seconds_total")
    assert list(nfs.values()) == [pytest.approx(3.0)]
    gpu = samples(f, "diskinfo_gpu_utilization_ratio")
    assert gpu == {(("gpu", "0"), ("name", "NVIDIA H200")): pytest.approx(0.4)}
    roles = samples(f, "diskinfo_process_read_bytes_per_second")
    assert roles[(("role", "worker"),)] == 5 * 2**20
    assert samples(f, "diskinfo_loader_data_wait_ratio")[()] == 0.75


def test_accumulated_counters_and_one_hot_gauges(sink):
    sink.write(full_record(SECRET))
    sink.write(full_record(SECRET, verdict=Verdict("compute-bound")))
    f, _ = scrape(sink)
    assert samples(f, "diskinfo_records_total")[()] == 2
    assert samples(f, "diskinfo_loader_wait_seconds_total")[()] == 3.0
    assert samples(f, "diskinfo_loader_batches_total")[()] == 20
    verdict = samples(f, "diskinfo_verdict")
    assert sum(verdict.values()) == 1 and verdict[(("verdict", "compute-bound"),)] == 1
    assert len(verdict) >= 6  # every known verdict has a series, so rules see 0 as well as 1
    seconds = samples(f, "diskinfo_verdict_seconds_total")
    assert seconds[(("verdict", "input-bound: disk"),)] == 2.0
    assert seconds[(("verdict", "compute-bound"),)] == 2.0
    pressure = samples(f, "diskinfo_node_pressure")
    assert sum(pressure.values()) == 1 and pressure[(("state", "saturated"),)] == 1


def test_absent_figures_are_absent_not_zero(sink):
    before, _ = scrape(sink)  # no record yet: only what is always true
    assert samples(before, "diskinfo_node_pressure")[(("state", "unknown"),)] == 1
    assert "diskinfo_disk_reads_completed" not in before
    plain = DeviceFigures("vda", paths=["/"], counters={"rd_ios": 1, "wr_ios": 2})
    sink.write(IntervalRecord(ts=time.time(), elapsed_s=1.0, devices=[plain]))
    f, _ = scrape(sink)
    assert samples(f, "diskinfo_disk_reads_completed_total") == {(("device", "vda"),): 1}
    assert "diskinfo_disk_discards_completed" not in f  # old kernel: no discard counters
    assert "diskinfo_disk_discards_per_second" not in f
    assert "diskinfo_gpu_utilization_ratio" not in f
    assert samples(f, "diskinfo_gpus")[()] == 0
    assert "diskinfo_loader_wait_seconds" not in f
    # the device went away: its series go too
    sink.write(IntervalRecord(ts=time.time(), elapsed_s=1.0))
    f, _ = scrape(sink)
    assert "diskinfo_disk_reads_completed" not in f


def test_no_secret_reaches_metrics_or_status(sink, monkeypatch):
    monkeypatch.setenv("JUPYTER_TOKEN", SECRET)
    monkeypatch.setenv("PUBLIC_KEY", f"ssh-ed25519 AAAA{SECRET}")
    sink.write(full_record(SECRET))
    _, text = scrape(sink)
    _, _, status = get(sink, "/status")
    for body in (text, status):
        assert SECRET not in body
        assert "alice" not in body  # NFS user name dropped with the password
    assert 'server="nas01"' in text
    assert json.loads(status)["nfs"][0]["server"] == "nas01"


def test_status_document_and_http_errors(sink):
    status, ctype, body = get(sink, "/status")
    assert status == 200 and ctype == "application/json"
    assert json.loads(body)["pressure"] == "unknown"
    sink.write(full_record(SECRET))
    doc = json.loads(get(sink, "/status")[2])
    assert doc["schema"] == "diskinfo.status/1"
    assert doc["pressure"] == "saturated"
    assert any("%util 97.0%" in e for e in doc["evidence"])
    assert doc["devices"][0]["device"] == "nvme0n1"
    assert doc["verdict"] == "input-bound: disk" and doc["data_wait_share"] == 0.75
    assert get(sink, "/nope")[0] == 404
    request = urllib.request.Request(f"http://127.0.0.1:{sink.port}/status", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=5)
    assert err.value.code == 405


def test_binds_only_the_configured_address(sink):
    assert sink._server.socket.getsockname()[0] == "127.0.0.1"
    if socket.has_ipv6:
        try:
            six = PrometheusSink(0, "::1")
        except UserError:
            pytest.skip("no IPv6 loopback here")
        try:
            assert six._server.socket.family == socket.AF_INET6
            with socket.create_connection(("::1", six.port), timeout=2):
                pass
            with pytest.raises(OSError):  # not on IPv4 loopback
                socket.create_connection(("127.0.0.1", six.port), timeout=2).close()
        finally:
            six.close()


def test_port_in_use_is_a_one_line_error(sink):
    with pytest.raises(UserError) as err:
        PrometheusSink(sink.port, "127.0.0.1")
    assert f"127.0.0.1:{sink.port}" in str(err.value) and err.value.exit_code == 1
    with pytest.raises(UserError):
        PrometheusSink(70000)


def test_watch_goes_on_without_metrics_when_the_port_is_taken(sink, tmp_path):
    """Two containers on the host network both default to 9101: the second monitor used to
    exit, and supervisord restarted it every few seconds, with no verdict ever."""
    import subprocess
    import sys

    p = subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", "watch", str(tmp_path), "--interval", "0.2",
         "--count", "2", "--log-dir", str(tmp_path / "logs"), "--metrics-port", str(sink.port),
         "--metrics-addr", "127.0.0.1", "--echo", "never"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    warning = [line for line in p.stderr.splitlines() if "warning" in line]
    assert warning == [
        f"diskinfo: warning: cannot serve metrics on 127.0.0.1:{sink.port}: Address already in "
        "use; monitoring goes on without the metrics endpoint (another port: --metrics-port; "
        "in the image, -e METRICS_PORT=...)"
    ]
    assert len((tmp_path / "logs" / "diskinfo.jsonl").read_text().splitlines()) == 2


def test_close_frees_the_port():
    s = PrometheusSink(0)
    port = s.port
    s.close()
    PrometheusSink(port).close()


def test_docs_table_is_the_exporters():
    assert generated("metrics.md", "metrics table") == markdown_table(), (
        "docs/metrics.md is out of date: replace its table with the output of "
        "`python -m diskinfo.sinks.prometheus`"
    )


finite = st.floats(allow_nan=False, allow_infinity=False, width=32)
anything = st.floats(allow_nan=True, allow_infinity=True)
label_text = st.text(min_size=1, max_size=20)  # quotes, backslashes, newlines, any unicode


@settings(max_examples=60, deadline=None)
@given(
    devices=st.lists(
        st.builds(
            DeviceFigures,
            device=label_text,
            paths=st.lists(label_text, max_size=3),
            r_s=anything,
            util=anything,
            r_await=anything,
            in_flight=st.integers(-5, 2**40),
            d_s=st.none() | finite,
            counters=st.none()
            | st.dictionaries(st.sampled_from(sorted(DISKSTATS)), st.integers(0, 2**64)),
        ),
        max_size=4,
        unique_by=lambda d: d.device,
    ),
    nfs=st.lists(
        st.builds(NfsFigures, mount=label_text, server=label_text, read_rtt_ms=anything),
        max_size=2,
        unique_by=lambda n: n.mount,
    ),
    verdict=st.none() | st.builds(Verdict, verdict=label_text),
    elapsed=st.floats(0.001, 1e6),
)
def test_any_record_renders_as_parseable_exposition(devices, nfs, verdict, elapsed):
    """Whatever the collectors put in a record, /metrics stays valid text format: label
    values are escaped, odd floats are rendered, each series appears once, and the text is
    prometheus_client's to the byte."""
    collector = RecordCollector(lambda: (record, totals))
    record = IntervalRecord(ts=1.0, elapsed_s=elapsed, devices=devices, nfs=nfs, verdict=verdict)
    totals = _Totals()
    totals.add(record)
    text = render(collector.collect()).decode()
    assert text == reference_text(collector.collect())
    families = list(text_string_to_metric_families(text))
    seen = set()
    for fam in families:
        assert fam.name.removesuffix("_total") in {n.removesuffix("_total") for n in SPECS}
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in seen, key
            seen.add(key)
    served_devices = {
        s.labels["device"]
        for fam in families
        if fam.name == "diskinfo_disk_io_now"
        for s in fam.samples
    }
    assert served_devices == {d.device for d in devices}


def test_the_verdicts_first_fix_is_a_label_while_there_is_one(sink):
    sink.write(full_record(SECRET))
    f, _ = scrape(sink)
    fix = (("fix", "faster-storage"), ("verdict", "input-bound: disk"))  # the id, not the words
    assert samples(f, "diskinfo_verdict_fix_info") == {fix: 1}
    sink.write(full_record(SECRET, verdict=Verdict("compute-bound")))  # a verdict without fixes
    f, _ = scrape(sink)
    assert "diskinfo_verdict_fix_info" not in f
