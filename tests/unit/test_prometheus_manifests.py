"""The Kubernetes example, validated as far as a machine without a cluster allows: structure,
cross-references between the objects, and its labeler script run for real against a live
exporter and a local stand-in for the API server's node PATCH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import yaml

from diskinfo.record import DeviceFigures, IntervalRecord
from diskinfo.sinks.prometheus import DEFAULT_PORT, PrometheusSink
from tests.helpers import ROOT
from tests.helpers.hostile_monitor import HostileMonitor

MANIFEST = ROOT / "monitoring/kubernetes/daemonset.yaml"
TOKEN = "eyJhbGciOi-test-service-account-token"


@pytest.fixture(scope="module")
def docs() -> dict[str, dict]:
    items = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    by_kind = {d["kind"]: d for d in items}
    assert len(by_kind) == len(items)
    return by_kind


def test_objects_reference_each_other(docs):
    assert set(docs) == {
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "DaemonSet",
    }
    for d in docs.values():
        assert d["apiVersion"] and d["metadata"]["name"]
    ns = docs["Namespace"]["metadata"]["name"]
    ds, sa = docs["DaemonSet"], docs["ServiceAccount"]
    assert ds["metadata"]["namespace"] == sa["metadata"]["namespace"] == ns
    assert ds["apiVersion"] == "apps/v1"
    spec = ds["spec"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == sa["metadata"]["name"]
    binding = docs["ClusterRoleBinding"]
    assert binding["roleRef"]["name"] == docs["ClusterRole"]["metadata"]["name"]
    assert binding["subjects"][0] == {"kind": "ServiceAccount", "name": "diskinfo", "namespace": ns}
    rule = docs["ClusterRole"]["rules"][0]
    assert rule["resources"] == ["nodes"] and "patch" in rule["verbs"]
    assert set(rule["verbs"]) <= {"get", "patch"}  # nothing more than the labeler needs


@pytest.mark.parametrize("version", ["1.25.0", "1.37.0"])  # oldest and newest schemas bundled
def test_every_object_validates_against_the_kubernetes_schema(version):
    """The API server's own OpenAPI schemas, strict: unknown fields and wrong types fail."""
    kv = pytest.importorskip("kubernetes_validate")
    for doc in yaml.safe_load_all(MANIFEST.read_text()):
        kv.validate(doc, version, strict=True)  # raises ValidationError


def test_schema_validation_catches_a_typo():
    kv = pytest.importorskip("kubernetes_validate")
    ds = next(d for d in yaml.safe_load_all(MANIFEST.read_text()) if d["kind"] == "DaemonSet")
    ds["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    with pytest.raises(kv.ValidationError):
        kv.validate(ds, "1.37.0", strict=True)


def test_monitor_container_serves_what_probes_and_scrapes_expect(docs):
    pod = docs["DaemonSet"]["spec"]["template"]
    containers = {c["name"]: c for c in pod["spec"]["containers"]}
    monitor = containers["monitor"]
    cmd = monitor["command"]
    assert cmd[:2] == ["diskinfo", "watch"]
    port = int(cmd[cmd.index("--metrics-port") + 1])
    assert port == DEFAULT_PORT
    assert cmd[cmd.index("--metrics-addr") + 1] == "0.0.0.0"  # the pod IP, for Prometheus
    # the command parses with the real CLI
    from diskinfo.cli import build_parser

    args = build_parser().parse_args(cmd[1:])
    assert args.metrics_port == port and args.paths == ["/workspace/data"]
    ports = {p["name"]: p["containerPort"] for p in monitor["ports"]}
    assert ports["metrics"] == port
    assert monitor["readinessProbe"]["httpGet"] == {"path": "/status", "port": "metrics"}
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(port)
    mounts = {m["name"]: m for m in monitor["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert set(mounts) <= set(volumes)
    assert mounts["data"]["readOnly"] is True
    for c in containers.values():
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    labeler = containers["labeler"]
    env = {e["name"]: e for e in labeler["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["DISKINFO_STATUS_URL"]["value"] == f"http://127.0.0.1:{port}/status"
    script_path = labeler["command"][-1]
    mount = next(m for m in labeler["volumeMounts"] if script_path.startswith(m["mountPath"]))
    cm = volumes[mount["name"]]["configMap"]["name"]
    assert cm == docs["ConfigMap"]["metadata"]["name"]
    assert Path(script_path).name in docs["ConfigMap"]["data"]


class FakeNodeAPI(BaseHTTPRequestHandler):
    """Records node PATCHes the way the API server would receive them."""

    calls: ClassVar[list[dict]] = []

    def do_PATCH(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        FakeNodeAPI.calls.append(
            {
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                "type": self.headers.get("Content-Type"),
                "body": json.loads(body),
            }
        )
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def run_labeler(docs, tmp_path, status_url: str, rounds: int) -> subprocess.CompletedProcess:
    """The ConfigMap's label_node.py against `status_url` and a fake node API (its calls in
    FakeNodeAPI.calls), `rounds` rounds."""
    script = tmp_path / "label_node.py"
    script.write_text(docs["ConfigMap"]["data"]["label_node.py"])
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text(TOKEN + "\n")
    api = ThreadingHTTPServer(("127.0.0.1", 0), FakeNodeAPI)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    FakeNodeAPI.calls = []
    try:
        env = dict(
            os.environ,
            NODE_NAME="gpu-node-07",
            KUBE_API=f"http://127.0.0.1:{api.server_address[1]}",
            SA_DIR=str(sa),
            DISKINFO_STATUS_URL=status_url,
            ROUNDS=str(rounds),
            PERIOD_S="0.05",
        )
        return subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60
        )
    finally:
        api.shutdown()
        api.server_close()


def test_labeler_mirrors_pressure_into_the_node_label(docs, tmp_path):
    sink = PrometheusSink(0)
    try:
        sink.write(
            IntervalRecord(ts=time.time(), elapsed_s=5, devices=[DeviceFigures("vda", util=99)])
        )
        out = run_labeler(docs, tmp_path, f"http://127.0.0.1:{sink.port}/status", 3)
    finally:
        sink.close()
    assert out.returncode == 0, out.stderr
    # three rounds, one state: one PATCH
    assert len(FakeNodeAPI.calls) == 1
    call = FakeNodeAPI.calls[0]
    assert call["path"] == "/api/v1/nodes/gpu-node-07"
    assert call["type"] == "application/merge-patch+json"
    assert call["auth"] == f"Bearer {TOKEN}"
    assert call["body"] == {"metadata": {"labels": {"diskinfo.io/storage-pressure": "saturated"}}}
    assert "diskinfo.io/storage-pressure=saturated" in out.stdout
    assert TOKEN not in out.stdout + out.stderr


def test_labeler_puts_only_the_four_states_on_the_node(docs, tmp_path):
    """A /status served by whoever holds the metrics port: any other pressure is 'unknown'."""
    with HostileMonitor("json", {"pressure": "drained-by-me"}) as monitor:
        out = run_labeler(docs, tmp_path, monitor.url, 2)
    assert out.returncode == 0, out.stderr
    assert [c["body"] for c in FakeNodeAPI.calls] == [
        {"metadata": {"labels": {"diskinfo.io/storage-pressure": "unknown"}}}
    ]
