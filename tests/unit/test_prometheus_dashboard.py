"""The Grafana dashboard and the alert rules query only metrics the exporter really serves.

SPECS is the exporter's declaration; test_prometheus_exporter checks that a full record serves
exactly SPECS, so a name found here in SPECS is a name Prometheus will have.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from diskinfo.sinks.prometheus import SPECS
from tests.helpers import ROOT

DASHBOARD = ROOT / "monitoring/grafana/dashboard.json"
RULES = ROOT / "monitoring/prometheus/rules.yml"
PROVISIONING = ROOT / "monitoring/grafana/provisioning"

# series Prometheus makes itself for every target
PROMETHEUS_OWN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL (or Grafana label_values) expression."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\$\w+", "", expr)  # Grafana variables
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
        word = m.group(0)
        rest = expr[m.end() :].lstrip()
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue  # a function or aggregation, or a keyword
        if re.fullmatch(r"\d*[smhdwy]", word):
            continue
        names.add(word)
    return names


def dashboard_queries() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    out = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                out.append((p["title"], t["expr"]))
            walk(p.get("panels", []))

    walk(dash["panels"])
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            q = var["query"]
            out.append((f"${var['name']}", q["query"] if isinstance(q, dict) else q))
    return out


def test_the_parser_finds_names_and_only_names():
    expr = (
        'sum by (instance, device) (rate(diskinfo_disk_read_bytes_total{instance=~"$node"}'
        "[$__rate_interval])) / on(device) group_left up offset 5m > bool 0.5"
    )
    assert metric_names(expr) == {"diskinfo_disk_read_bytes_total", "up"}
    assert metric_names("label_values(diskinfo_build_info, instance)") == {
        "diskinfo_build_info",
        "instance",  # label_values' second argument; the caller strips it
    }


def test_every_dashboard_query_names_served_metrics():
    queries = dashboard_queries()
    assert len(queries) >= 15
    used = set()
    for title, expr in queries:
        if expr.startswith("label_values("):
            expr = expr.rsplit(",", 1)[0] + ")"
        names = metric_names(expr)
        assert names, f"{title}: no metric in {expr!r}"
        unknown = names - set(SPECS) - PROMETHEUS_OWN
        assert not unknown, (
            f"panel {title!r} queries metrics the exporter does not serve: {unknown}"
        )
        used |= names
    # what the issue asks the dashboard to show
    for needed in (
        "diskinfo_disk_read_bytes_total",  # throughput
        "diskinfo_disk_reads_completed_total",  # IOPS
        "diskinfo_disk_read_time_seconds_total",  # await
        "diskinfo_disk_io_time_seconds_total",  # %util
        "diskinfo_gpu_utilization_ratio",
        "diskinfo_loader_wait_seconds_total",  # data-wait share
        "diskinfo_verdict",
    ):
        assert needed in used, needed


def test_dashboard_is_provisionable():
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and "id" not in dash  # provisioning assigns the id
    names = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "node", "device"} <= names
    ids = []

    def walk(panels):
        for p in panels:
            ids.append(p["id"])
            if p["type"] != "row":
                assert p["datasource"]["uid"] == "${datasource}", p["title"]
                assert p["targets"], p["title"]
                assert all(t["datasource"]["uid"] == "${datasource}" for t in p["targets"])
            walk(p.get("panels", []))

    walk(dash["panels"])
    assert len(ids) == len(set(ids))
    types = {p["type"] for p in dash["panels"]}
    assert "state-timeline" in types  # the verdict timeline
    for q in dashboard_queries():
        if "device" in q[1] and q[0] != "$device" and "diskinfo_disk" in q[1]:
            assert 'device=~"$device"' in q[1], q  # per device
        if q[0] not in ("$node",):
            assert 'instance=~"$node"' in q[1], q  # per node
    providers = yaml.safe_load((PROVISIONING / "dashboards/diskinfo.yaml").read_text())
    assert providers["apiVersion"] == 1 and providers["providers"][0]["type"] == "file"
    sources = yaml.safe_load((PROVISIONING / "datasources/prometheus.yaml").read_text())
    assert sources["datasources"][0]["type"] == "prometheus"


def test_alert_rules_name_served_metrics():
    groups = yaml.safe_load(RULES.read_text())["groups"]
    rules = [r for g in groups for r in g["rules"]]
    recorded = {r["record"] for r in rules if "record" in r}
    assert {r["alert"] for r in rules if "alert" in r} >= {
        "DiskinfoDiskAwaitHigh",
        "DiskinfoDiskUtilHigh",
        "DiskinfoInputBound",
        "DiskinfoMonitorDown",
    }
    for rule in rules:
        names = metric_names(rule["expr"]) - {"time"} - recorded
        unknown = names - set(SPECS) - PROMETHEUS_OWN
        assert not unknown, f"{rule.get('alert', rule.get('record'))}: {unknown}"
        if "alert" in rule:
            assert rule["annotations"]["summary"] and rule["annotations"]["description"]


@pytest.mark.parametrize("verdict", ["input-bound: disk", "compute-bound"])
def test_verdict_matcher_in_rules_matches_known_verdicts(verdict):
    from diskinfo.sinks.prometheus import VERDICTS

    assert verdict in VERDICTS
    rule = next(
        r
        for g in yaml.safe_load(RULES.read_text())["groups"]
        for r in g["rules"]
        if r["alert"] == "DiskinfoInputBound"
    )
    pattern = re.search(r'verdict=~"([^"]+)"', rule["expr"]).group(1)
    assert bool(re.fullmatch(pattern, verdict)) == verdict.startswith("input-bound")
