"""A slow disk reaches the team on WeCom, with real engines end to end: a real `diskinfo watch`
on a loop device whose reads are slowed (the reader's cgroup caps its reads on the disk under
the loop, so each loop read waits), Debian's Prometheus scraping it with the shipped rules,
Debian's Alertmanager with the shipped config (monitoring/alertmanager/, its secret put in by
render.sh) sending through wechat_configs to a stand-in of WeCom's API on 127.0.0.1.

Only the waits are shortened, in test copies: the await rule's `for:` and rate window, and
Alertmanager's group_wait and group_interval. Everything the operator reads is the shipped
text: the rule's annotations and monitoring/alertmanager/wecom.tmpl.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.daemons import Daemons
from tests.helpers.loopdev import ReadCap, ext4_loop
from tests.helpers.net import free_port, wait_for_port, wait_until
from tests.helpers.wecom import EXPIRED, WeCom

ALERTMANAGER = shutil.which("prometheus-alertmanager")
PROMETHEUS = shutil.which("prometheus")
DISKINFO = Path(sys.executable).with_name("diskinfo")
AM_DIR = ROOT / "monitoring/alertmanager"
RULES = ROOT / "monitoring/prometheus/rules.yml"
NODE = "gpu-node-07"  # the instance label an operator's scrape config would give
SECRET = "wecom-app-secret-Zq81"  # only in the test's secret file and the rendered copy
READ_IOPS = 8  # the reader's cap on the disk under the loop: ~125 ms per read


def alertmanager_version() -> tuple[int, int]:
    out = subprocess.run([ALERTMANAGER, "--version"], capture_output=True, text=True, timeout=30)
    found = re.search(r"version (\d+)\.(\d+)", out.stdout + out.stderr)
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


# Before 0.26 the WeCom receiver read the reply's `code` and `error` where WeCom answers
# `errcode` and `errmsg` (prometheus/alertmanager#3330): every refusal, 42001 included, reads
# as success and the message is lost without a log line. Debian 12 ships 0.25.
READS_ERRCODE = ALERTMANAGER is not None and alertmanager_version() >= (0, 26)

pytestmark = [
    pytest.mark.system,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="loop devices and cgroups need root"),
    pytest.mark.tools("prometheus-alertmanager", "prometheus"),
    pytest.mark.skipif(
        not ReadCap.available(), reason="needs cgroup v1 blkio or v2 io to slow reads"
    ),
]

# A training loop whose every batch is one 4 KiB O_DIRECT read of its dataset, measured by
# diskinfo.torch.watch as a DataLoader would be; it ends when the stop file appears.
READER = r"""
import mmap, os, random, sys, time
import diskinfo.torch

path, stop = sys.argv[1], sys.argv[2]
fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
blocks = os.fstat(fd).st_size // 4096
buf = mmap.mmap(-1, 4096)


def batches():
    while not os.path.exists(stop):
        os.preadv(fd, [buf], random.randrange(blocks) * 4096)
        yield 1


for _ in diskinfo.torch.watch(batches()):
    time.sleep(0.002)  # the step
"""


def whole_disk(path: Path) -> str:
    """MAJ:MIN of the disk that holds path (blkio throttles disks, not partitions)."""
    st = os.stat(path)
    sys_dev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if (sys_dev / "partition").exists():
        sys_dev = sys_dev.resolve().parent
    return (sys_dev / "dev").read_text().strip()


def rule_copy(dst: Path) -> None:
    """rules.yml with only the await rule's waits shortened: 3 minutes held, 1 minute rates."""
    text = RULES.read_text()
    start = text.index("- alert: DiskinfoDiskAwaitHigh")
    end = text.index("- alert:", start + 1)
    block = text[start:end]
    short = block.replace("[1m]", "[10s]").replace("for: 3m", "for: 15s")
    assert short.count("[10s]") == 4 and "for: 15s" in short, block
    dst.write_text(text[:start] + short + text[end:])


def alertmanager_copy(dst: Path, secret_file: Path, api_url: str) -> str:
    """The shipped config as render.sh deploys it, pointed at the stand-in and with short
    group waits; returns the CorpID it names."""
    rendered = subprocess.run(
        ["bash", str(AM_DIR / "render.sh"), str(secret_file)],
        input=(AM_DIR / "alertmanager.yml").read_text(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert SECRET in rendered and "@WECOM_API_SECRET@" not in rendered
    for old, new in (
        ("https://qyapi.weixin.qq.com/cgi-bin/", api_url),
        ("group_wait: 30s", "group_wait: 1s"),
        ("group_interval: 5m", "group_interval: 5s"),
    ):
        assert old in rendered, old
        rendered = rendered.replace(old, new)
    dst.write_text(rendered)
    shutil.copy(AM_DIR / "wecom.tmpl", dst.parent)
    return re.search(r"wechat_api_corp_id: (\S+)", rendered).group(1)


def lost_after_42001(am_port: int, wecom: WeCom) -> None:
    """What Alertmanager before 0.26 does with an expired token: one more alert, straight into
    Alertmanager's API, meets WeCom's 42001, is taken for sent and never retried."""
    alert = [{"labels": {"alertname": "DiskinfoMonitorDown", "instance": f"{NODE}:9101"},
              "annotations": {"summary": "a third message"}}]  # fmt: skip
    request = urllib.request.Request(
        f"http://127.0.0.1:{am_port}/api/v2/alerts",
        data=json.dumps(alert).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        assert reply.status == 200
    wait_until(lambda: wecom.refused, 30, "the third message's send", step=1)
    time.sleep(15)  # three group intervals: time enough for a retry that never comes
    assert wecom.refused == [("message/send", EXPIRED)], wecom.refused
    assert len(wecom.contents()) == 2 and wecom.issued == 1, wecom.contents()
    version = ".".join(map(str, alertmanager_version()))
    print(f"Alertmanager {version} took WeCom's 42001 for success: that message is lost")


@pytest.fixture
def slow_disk(tmp_path: Path) -> Iterator[tuple[Path, str, str]]:
    """An ext4 loop device read directly from its backing disk, with a 64 MiB dataset on it.
    Yields (mount point, loop device name, MAJ:MIN of the backing disk)."""
    (tmp_path / "disk").mkdir()
    with ext4_loop(tmp_path / "disk", 128, "--direct-io=on") as (mnt, dev):
        subprocess.run(
            ["dd", "if=/dev/urandom", f"of={mnt}/data.bin", "bs=1M", "count=64", "conv=fsync"],
            check=True,
            capture_output=True,
        )
        yield mnt, dev, whole_disk(tmp_path / "disk" / "disk.img")


def test_a_slow_disk_reaches_wecom_once_and_its_end_too(slow_disk, tmp_path: Path):
    mnt, dev, backing = slow_disk
    run = tmp_path / "run"
    run.mkdir()
    env = dict(os.environ, DISKINFO_STATE_DIR=str(run / "state"))
    daemons = Daemons(run)
    cap = ReadCap(f"diskinfo-alert-{os.getpid()}", backing, read_iops=READ_IOPS)
    stop = run / "stop"
    secret_file = run / "wecom-secret"
    secret_file.write_text(SECRET + "\n")
    secret_file.chmod(0o600)
    metrics, prom_port, am_port = free_port(), free_port(), free_port()

    # the token expires at the first message where Alertmanager recovers from that; on 0.25 at
    # a third one, sent once the incident's two have shown what operators read
    with WeCom("", SECRET, expire_at=1 if READS_ERRCODE else 3) as wecom:
        corp_id = alertmanager_copy(run / "alertmanager.yml", secret_file, wecom.api_url)
        wecom.corp_id = corp_id
        rule_copy(run / "rules.yml")
        (run / "prometheus.yml").write_text(
            f"""global: {{scrape_interval: 1s, evaluation_interval: 1s}}
rule_files: [rules.yml]
alerting:
  alertmanagers:
    - static_configs: [{{targets: ["127.0.0.1:{am_port}"]}}]
scrape_configs:
  - job_name: diskinfo
    static_configs:
      - targets: ["127.0.0.1:{metrics}"]
        labels: {{instance: "{NODE}:9101"}}
"""
        )
        try:
            daemons.start(
                "diskinfo",
                [str(DISKINFO), "watch", str(mnt), "--interval", "1", "--log-dir",
                 str(run / "logs"), "--metrics-port", str(metrics)],
                env=env,
            )  # fmt: skip
            daemons.start(
                "alertmanager",
                [ALERTMANAGER, f"--config.file={run / 'alertmanager.yml'}",
                 f"--storage.path={run / 'am-data'}", f"--web.listen-address=127.0.0.1:{am_port}",
                 "--cluster.listen-address="],
            )  # fmt: skip
            daemons.start(
                "prometheus",
                [PROMETHEUS, f"--config.file={run / 'prometheus.yml'}",
                 f"--storage.tsdb.path={run / 'prom-data'}",
                 f"--web.listen-address=127.0.0.1:{prom_port}"],
            )  # fmt: skip
            for port in (metrics, am_port, prom_port):
                wait_for_port(port, 60)

            reader = daemons.start(
                "reader", [sys.executable, "-c", READER, f"{mnt}/data.bin", str(stop)], env=env
            )
            cap.add(reader.pid)
            loaded = time.monotonic()
            firing = wait_until(
                lambda: [c for c in wecom.contents() if "Resolved" not in c],
                150,
                lambda: (
                    f"a firing message; Prometheus: {daemons.log('prometheus')}\n"
                    f"Alertmanager: {daemons.log('alertmanager')}"
                ),
                step=1,
            )
            fired_after = time.monotonic() - loaded
            text = firing[0]
            print(f"\n--- the firing message ---\n{text}\n---")
            # the node, the device, the figure, and the first fix the node's verdict names
            assert NODE in text and dev in text, text
            figure = re.search(rf"Requests to {dev} took ([\d.]+)(ms|s) on average", text)
            assert figure, text
            seconds = float(figure.group(1)) / (1000 if figure.group(2) == "ms" else 1)
            assert seconds > 0.05, text
            records = [
                json.loads(line) for line in (run / "logs/diskinfo.jsonl").read_text().splitlines()
            ]
            # the alert's `fix` is an id (docs/metrics.md); the message says it in words
            fixes = {
                r["verdict"]["fix_ids"][0]
                for r in records
                if (r.get("verdict") or {}).get("fix_ids")
            }
            assert fixes, "the monitor named no fix"
            said = re.search(r"First fix to try:\*\* (.+) \(([a-z-]+)\)$", text, re.M)
            assert said and said.group(2) in fixes and len(said.group(1)) > 10, (text, fixes)
            message = wecom.messages[0]
            assert message["msgtype"] == "markdown" and message["agentid"] == "1000002"
            assert message["toparty"] == "2"
            if READS_ERRCODE:  # the token expired once: a new one, and the message sent again
                assert wecom.refused == [("message/send", EXPIRED)] and wecom.issued == 2
            else:
                assert wecom.refused == [] and wecom.issued == 1

            stop.touch()
            reader.wait(timeout=30)
            ended = time.monotonic()
            resolved = wait_until(
                lambda: [c for c in wecom.contents() if "Resolved" in c],
                90,
                lambda: f"a resolved message; got {wecom.contents()}",
                step=1,
            )
            resolved_after = time.monotonic() - ended
            assert NODE in resolved[0] and dev in resolved[0], resolved[0]
            assert "First fix" not in resolved[0]
            # once: Prometheus re-sends the firing alert, Alertmanager must not re-notify
            assert len(wecom.contents()) == 2, wecom.contents()
            assert SECRET not in "".join(wecom.contents())
            print(
                f"\nfiring message {fired_after:.0f} s after the load began "
                f"(rule held 15 s, 10 s rates), resolved {resolved_after:.0f} s after it ended"
            )
            if not READS_ERRCODE:
                lost_after_42001(am_port, wecom)
        finally:
            stop.touch()
            daemons.stop()
            cap.remove()
