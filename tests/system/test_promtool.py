"""The alert rules and the example configuration through Debian's promtool: they load, their
unit tests pass, and the unit tests do catch a broken rule."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT

PROM = ROOT / "monitoring/prometheus"
PROMTOOL = shutil.which("promtool")

pytestmark = [
    pytest.mark.system,
    pytest.mark.tools("promtool"),
]


def promtool(*args: str, cwd: Path = PROM) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_check_rules():
    out = promtool("check", "rules", "rules.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    # every alert and recording rule the file declares is one promtool found
    rules = yaml.safe_load((PROM / "rules.yml").read_text())
    count = sum(len(group["rules"]) for group in rules["groups"])
    assert count >= 11, count  # the node alerts and the job view's rules and alert
    assert f"SUCCESS: {count} rules found" in out.stdout, out.stdout


def test_check_example_config():
    out = promtool("check", "config", "prometheus.yml")
    assert out.returncode == 0, out.stdout + out.stderr


def test_rule_unit_tests_pass():
    out = promtool("test", "rules", "rules_test.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


@pytest.mark.parametrize(
    ("old", "new", "alert"),
    [
        ("> 0.05", "> 0.5", "DiskinfoDiskAwaitHigh"),  # threshold too high: never fires
        ("> 0.95", "> 0.5", "DiskinfoDiskUtilHigh"),  # too low: fires on the healthy disk
        ("for: 5m", "for: 1m", "DiskinfoInputBound"),  # too early
        ('up{job="diskinfo"} == 0', 'up{job=~".+"} == 0', "DiskinfoMonitorDown"),  # other jobs
        ("{instance=%q}", "{device=%q}", "DiskinfoDiskAwaitHigh"),  # not the node's fix
    ],
)
def test_rule_unit_tests_catch_a_broken_rule(tmp_path: Path, old: str, new: str, alert: str):
    rules = (PROM / "rules.yml").read_text()
    assert old in rules
    (tmp_path / "rules.yml").write_text(rules.replace(old, new, 1))
    shutil.copy(PROM / "rules_test.yml", tmp_path)
    out = promtool("test", "rules", "rules_test.yml", cwd=tmp_path)
    assert out.returncode != 0
    assert f"alertname: {alert}" in out.stdout + out.stderr
