"""The Grafana dashboard against Grafana's own schema (@grafana/schema, compiled by tsc; `make
lint` runs the same script): the shipped one passes, a misspelt property or a value of the
wrong type fails with the line, as Grafana's loader would drop or refuse them."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.helpers import ROOT

SCRIPT = ROOT / "scripts" / "check-grafana-dashboard.sh"
DASHBOARD = ROOT / "monitoring/grafana/dashboard.json"


@pytest.mark.tools("npm", "node")
def test_the_dashboard_matches_grafanas_schema_and_a_broken_one_does_not(tmp_path):
    ok = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0 and "matches @grafana/schema 13.2.3" in ok.stdout, ok
    broken = json.loads(DASHBOARD.read_text())
    broken["panels"][0]["gridPoss"] = broken["panels"][0].pop("gridPos")  # a typo
    broken["panels"][1]["type"] = 3  # a number where Grafana wants the panel's name
    path = tmp_path / "dashboard.json"
    path.write_text(json.dumps(broken, indent=2))
    bad = subprocess.run(
        ["bash", str(SCRIPT), str(path)], capture_output=True, text=True, timeout=300
    )
    assert bad.returncode == 1, bad
    assert "'\"gridPoss\"' does not exist" in bad.stdout and "TS2322" in bad.stdout, bad.stdout
    assert "does not match @grafana/schema's Dashboard" in bad.stderr, bad.stderr
