"""Text from a node reaches an operator's WeCom message only as identifiers or defanged text:
a device label and a verdict's `fix` label served by whoever holds the metrics port form no
markdown link, font tag, code span, heading or URL, through the shipped rules (Debian's
promtool) and the shipped template (Debian's amtool)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from tests.helpers import ROOT

PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")
RULES = ROOT / "monitoring/prometheus/rules.yml"
TEMPLATE = ROOT / "monitoring/alertmanager/wecom.tmpl"

pytestmark = pytest.mark.system

DEVICE = "vda*[x](http://e.vil)"
FIX = "[click here](http://evil.example/x) `rm -rf /` **now** <font color=info>ok</font>"
# what markdown could make of text: a link, a tag, a code span, bold, a heading, a URL
MARKDOWN = re.compile(r"\[|\]|<|`|\*\*[^*]*\*\*.*\*\*|^#|://", re.M)


def test_the_rules_defang_a_forged_device_and_fix():
    if PROMTOOL is None:
        pytest.skip("promtool not installed (apt install prometheus)")
    series = [
        {"series": f'diskinfo_disk_io_time_seconds_total{{job="diskinfo",instance="n1:9101",'
                   f'device={json.dumps(DEVICE)}}}', "values": "0+14.7x40"},
        {"series": f'diskinfo_verdict_fix_info{{job="diskinfo",instance="n1:9101",'
                   f'verdict="input-bound: disk",fix={json.dumps(FIX)}}}', "values": "1x40"},
    ]  # fmt: skip
    case = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "15s",
        "tests": [{"interval": "15s", "input_series": series, "alert_rule_test": [{
            "eval_time": "5m", "alertname": "DiskinfoDiskUtilHigh",
            "exp_alerts": [{
                "exp_labels": {"severity": "warning", "job": "diskinfo", "instance": "n1:9101",
                               "device": DEVICE},
                "exp_annotations": {
                    "summary": "Disk vda??x??http:??e.vil? on n1:9101: %util above 95%",
                    "description": "vda??x??http:??e.vil? was busy 98% of the time for 3 "
                    "minutes. On SSD/NVMe and RAID %util can reach 100% below the device's "
                    "limit: check await and throughput against `diskinfo bench`.",
                    "fix": "click here(http:/ /evil.example/x) rm -rf / now font color=info>ok/"
                    "font>",
                },
            }],
        }]}],
    }  # fmt: skip
    out = subprocess.run(
        [PROMTOOL, "test", "rules", "/dev/stdin"], input=json.dumps(case),
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


def render(alert: dict) -> str:
    data = {
        "receiver": "wecom-ops", "status": alert["status"], "alerts": [alert],
        "groupLabels": {}, "commonLabels": {}, "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9093",
    }  # fmt: skip
    out = subprocess.run(
        [AMTOOL, "template", "render", f"--template.glob={TEMPLATE}", "--template.data=/dev/stdin",
         '--template.text={{ template "diskinfo.wecom.message" . }}'],
        input=json.dumps(data), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("status", ["firing", "resolved"])
def test_the_wecom_template_defangs_whatever_arrives(status: str):
    """Labels and annotations as they might come from any rule, not only ours."""
    if AMTOOL is None:
        pytest.skip("amtool not installed (apt install prometheus-alertmanager)")
    alert = {
        "status": status,
        "labels": {"alertname": "DiskinfoDiskUtilHigh", "instance": "n1](http://x.y):9101",
                   "device": DEVICE + "\x1b[2J"},
        "annotations": {
            "summary": "Disk [vda](http://evil.example) **saturated**\n# all clear",
            "description": "line one\n> quoted <font color=\"info\">ok</font> ![i](http://p/x.png)"
            + " padding" * 100,
            "fix": FIX + "\x1b]0;title\x07 https://evil.example/y",
        },
        "startsAt": "2026-01-01T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "", "fingerprint": "1",
    }  # fmt: skip
    text = render(alert)
    print(f"\n{text}")
    ours = [  # the template's own markup: headings, its font tags, the quote, bold labels
        '### <font color="warning">', '### <font color="info">Resolved: ', "</font>",
        "> node: **", "**, device: **", "**First fix to try:** ",
    ]  # fmt: skip
    body = text
    for mark in ours:
        body = body.replace(mark, " ")
    body = re.sub(r"\*\*\n", "\n", body)  # the bold node/device labels' closing marks
    assert not MARKDOWN.search(body), body
    assert all(" " <= ch <= "~" for line in text.splitlines() for ch in line), text
    assert len(text.splitlines()) <= 5, text
    assert "n1??http:??x.y?" in text and "vda??x??http:??e.vil???2J" in text
    assert "padding" in text and len(max(text.splitlines(), key=len)) < 450


def test_the_wecom_message_says_a_fix_id_in_words():
    if AMTOOL is None:
        pytest.skip("amtool not installed (apt install prometheus-alertmanager)")
    alert = {
        "status": "firing",
        "labels": {"alertname": "DiskinfoInputBound", "instance": "n1:9101"},
        "annotations": {"summary": "s", "description": "d", "fix": "more-workers-short-queue"},
        "startsAt": "2026-01-01T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "", "fingerprint": "1",
    }  # fmt: skip
    text = render(alert)
    assert (
        "**First fix to try:** more workers when the queue is short (aqu-sz below 1) "
        "(more-workers-short-queue)\n" in text
    ), text
