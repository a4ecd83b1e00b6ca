"""The exporter's own text format against prometheus_client's, and what the monitor no longer
loads to serve it."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from diskinfo.sinks.prometheus.exposition import Family, number, process_families, render
from tests.helpers.exposition import reference_text

names = st.from_regex(r"[a-z_][a-z0-9_]{0,15}", fullmatch=True)


@st.composite
def families(draw: st.DrawFn) -> list[Family]:
    out = []
    for i, kind in enumerate(draw(st.lists(st.sampled_from(["counter", "gauge"]), max_size=4))):
        base = f"{draw(names)}_{i}"
        labels = draw(st.lists(names, max_size=3, unique=True))
        fam = Family(f"{base}_total" if kind == "counter" else base, kind, draw(st.text()), labels)
        for _ in range(draw(st.integers(0, 3))):
            fam.add(
                [draw(st.text()) for _ in labels], draw(st.floats() | st.integers(-(2**70), 2**70))
            )
        out.append(fam)
    return out


@settings(max_examples=300, deadline=None)
@given(families())
def test_any_families_are_written_as_prometheus_client_writes_them(fams):
    """Help and label values with quotes, backslashes, newlines and any unicode; any float,
    huge integers; label names in any order (prometheus_client sorts them)."""
    assert render(fams).decode() == reference_text(fams)


def test_numbers_are_spelled_as_go_spells_them():
    assert [number(v) for v in (math.inf, -math.inf, math.nan, 1234567.0, 0.1, 1e22, -5e-324)] == [
        "+Inf",
        "-Inf",
        "NaN",
        "1.234567e+06",
        "0.1",
        "1e+22",
        "-5e-324",
    ]


def test_the_monitors_own_process_figures_have_the_client_librarys_names_and_values():
    ours = {f.name: f.samples[0][1] for f in process_families()}
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    theirs = {
        s.name: s.value
        for fam in text_string_to_metric_families(generate_latest(registry).decode())
        for s in fam.samples
    }
    assert ours.keys() == theirs.keys()
    for name in ("process_start_time_seconds", "process_max_fds", "process_virtual_memory_bytes"):
        assert ours[name] == pytest.approx(theirs[name], rel=0.05), name
    assert ours["process_resident_memory_bytes"] > 1e6


def test_serving_metrics_loads_no_http_client_email_or_openssl():
    """The monitor's resident memory: prometheus_client's import brought urllib, http.client,
    email and ssl (OpenSSL's libcrypto) into the monitor, about 8 MiB (benchmarks/results/
    monitor_memory.md). A real scrape over HTTP, then the modules the process holds."""
    code = """
import socket, sys, time
from diskinfo.record import IntervalRecord
from diskinfo.sinks.prometheus import PrometheusSink
sink = PrometheusSink(0)
sink.write(IntervalRecord(ts=time.time(), elapsed_s=1.0))
with socket.create_connection(("127.0.0.1", sink.port)) as c:
    c.sendall(b"GET /metrics HTTP/1.1\\r\\nAccept: application/openmetrics-text\\r\\n\\r\\n")
    reply = b""
    while chunk := c.recv(65536):
        reply += chunk
sink.close()
assert reply.startswith(b"HTTP/1.0 200 OK"), reply[:100]
assert b"diskinfo_records_total 1.0" in reply and b"process_resident_memory_bytes" in reply
heavy = ("prometheus_client", "ssl", "_ssl", "_hashlib", "http.client", "http.server", "email",
         "urllib.request", "wsgiref")
print(" ".join(m for m in heavy if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == []
