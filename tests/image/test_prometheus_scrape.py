"""A real Prometheus (Debian's /usr/bin/prometheus) on loopback scrapes the monitor inside a
running container of the image while fio loads the disk behind /workspace/data; the rate()
read back through Prometheus's HTTP query API agrees with diskinfo's own interval figures in
its JSONL. Also: the alert rules load in the real server, every dashboard query is valid
PromQL there, and no token reaches metrics, /status or the logs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import ROOT

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
MIB = 2**20
WINDOW_S = 20  # rate() window: 20 monitor intervals
LOAD_S = 30  # fio runtime; the window is read after LOAD_S - 4 s of load
SECRET = "tok-5e1f0c0ffee-not-for-metrics"

pytestmark = [
    pytest.mark.image,
    pytest.mark.slow,
    pytest.mark.tools("prometheus", "fio"),
    pytest.mark.skipif(os.geteuid() != 0, reason="loop devices need root"),
]


def http_json(url: str, timeout: float = 5) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def http_text(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


@pytest.fixture
def loop_fs(tmp_path: Path):
    """ext4 on a loop device: the only I/O on it is this test's fio."""
    img, mnt = tmp_path / "disk.img", tmp_path / "mnt"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(256 * MIB)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(img)], check=True, capture_output=True)
    dev = subprocess.run(
        ["losetup", "-f", "--show", str(img)], check=True, capture_output=True, text=True
    ).stdout.strip()
    try:
        subprocess.run(["mount", dev, str(mnt)], check=True)
        try:
            yield mnt, Path(dev).name
        finally:
            subprocess.run(["umount", "-l", str(mnt)], check=False)
    finally:
        subprocess.run(["losetup", "-d", dev], check=False)


class Prometheus:
    def __init__(self, tmp: Path, target: str, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{self.port}"
        config = tmp / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files:\n  - {ROOT / 'monitoring/prometheus/rules.yml'}\n"
            "scrape_configs:\n  - job_name: diskinfo\n    static_configs:\n"
            f"      - targets: ['{target}']\n"
        )
        self.log = open(tmp / "prometheus.log", "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip

    def query(self, expr: str, at: float | None = None) -> list[dict]:
        params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
        doc = http_json(f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}")
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.log.close()


def interval_mean(records: list[dict], dev: str, key: str, first: int, last: int) -> float:
    """diskinfo's own figure over records first+1..last (elapsed-weighted, as a rate over
    the same span would be)."""
    num = den = 0.0
    for rec in records[first + 1 : last + 1]:
        fig = next(d for d in rec["devices"] if d["device"] == dev)
        num += fig[key] * rec["elapsed_s"]
        den += rec["elapsed_s"]
    return num / den


def test_prometheus_rate_agrees_with_diskinfos_interval_figures(
    container, loop_fs, tmp_path, new_port, wait_until
):
    mnt, dev = loop_fs
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chmod(logs, 0o777)  # the monitor runs as the unprivileged user
    running = container(
        env={
            "DISKINFO_PATHS": "/workspace/data",
            "DISKINFO_INTERVAL": "1",
            "METRICS_ADDR": "127.0.0.1",
            "JUPYTER_TOKEN": SECRET,
        },
        volumes={
            str(mnt): {"bind": "/workspace/data", "mode": "ro"},
            str(logs): {"bind": "/workspace/logs", "mode": "rw"},
        },
    )
    metrics = f"127.0.0.1:{running.ports['METRICS_PORT']}"
    wait_until(
        lambda: http_json(f"http://{metrics}/status")["pressure"] != "unknown",
        90,
        lambda: f"the monitor's first record; container logs:\n{running.logs()[-3000:]}",
    )
    prom = Prometheus(tmp_path, metrics, new_port())
    fio = None
    try:
        wait_until(lambda: http_text(f"{prom.url}/-/ready"), 60, "Prometheus ready")
        wait_until(lambda: prom.query('up{job="diskinfo"} == 1'), 30, "a first scrape")
        fio = subprocess.Popen(
            ["fio", "--name=load", f"--filename={mnt}/load", "--size=64M", "--rw=randread",
             "--bs=64k", "--direct=1", "--ioengine=libaio", "--iodepth=32", "--numjobs=2",
             "--time_based", f"--runtime={LOAD_S}", "--output-format=terse"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        started = time.time()
        time.sleep(LOAD_S - 4)
        at = time.time() - 1.0  # a window well inside the load
        assert at - WINDOW_S > started + 2
        sel = f'{{job="diskinfo",device="{dev}"}}'
        rates = {}
        for name in ("read_bytes_total", "reads_completed_total", "io_time_seconds_total"):
            result = prom.query(f"rate(diskinfo_disk_{name}{sel}[{WINDOW_S}s])", at)
            rates[name] = float(result[0]["value"][1])
        raw = prom.query(f"diskinfo_disk_read_bytes_total{sel}[{WINDOW_S}s]", at)[0]["values"]
        # while we are here: the real server loaded the rules and runs every dashboard query
        rules = http_json(f"{prom.url}/api/v1/rules")["data"]["groups"]
        dashboard_results = run_dashboard_queries(prom, dev, at)
        scraped = http_text(f"http://{metrics}/metrics")
        status = http_text(f"http://{metrics}/status")
        # a user's `diskinfo status` inside the container finds the monitor by METRICS_PORT
        code, printed = running.exec(["diskinfo", "status"], user="jovyan")
        assert code == 0, printed
        assert json.loads(printed)["pressure"] in ("ok", "busy", "saturated")
    finally:
        if fio is not None:
            fio.terminate()
            fio.wait(timeout=30)
        prom.stop()

    records = [json.loads(line) for line in (logs / "diskinfo.jsonl").read_text().splitlines()]
    records = [r for r in records if any(d["device"] == dev for d in r["devices"])]
    # the records whose counters Prometheus scraped first and last in the window
    sectors = [next(d for d in r["devices"] if d["device"] == dev)["counters"]["rd_sectors"]
               for r in records]  # fmt: skip
    first = sectors.index(round(float(raw[0][1]) / 512))
    last = sectors.index(round(float(raw[-1][1]) / 512))
    assert last - first >= WINDOW_S // 2, (first, last)

    expected = {
        "read_bytes_total": interval_mean(records, dev, "rmb_s", first, last) * MIB,
        "reads_completed_total": interval_mean(records, dev, "r_s", first, last),
        "io_time_seconds_total": interval_mean(records, dev, "util", first, last) / 100,
    }
    print(f"\n{dev}: Prometheus rate() vs diskinfo's intervals over {last - first} records:")
    for name, value in rates.items():
        print(f"  {name:24s} {value:14.1f} {expected[name]:14.1f} {value / expected[name]:.4f}")
    assert expected["read_bytes_total"] > 50 * MIB, "fio produced no real load"
    for name, value in rates.items():
        assert value == pytest.approx(expected[name], rel=0.02), name

    groups = {g["name"]: g for g in rules}
    assert {r["name"] for r in groups["diskinfo"]["rules"]} >= {
        "DiskinfoDiskAwaitHigh", "DiskinfoDiskUtilHigh", "DiskinfoInputBound",
        "DiskinfoMonitorDown",
    }  # fmt: skip
    assert all(r["health"] == "ok" for r in groups["diskinfo"]["rules"]), groups
    for title, expr, result in dashboard_results:
        # what every monitor has (no GPU, no instrumented loop, no NFS here)
        if re.search(r"diskinfo_(disk_|node_pressure|build_info|verdict|host_cpu)", expr):
            assert result, f"dashboard panel {title!r} has no data: {expr}"

    # no token anywhere the monitor writes: metrics, /status, its logs and its supervisor log
    texts = {"metrics": scraped, "status": status}
    for path in logs.iterdir():
        if path.is_file() and path.name.startswith("diskinfo"):
            texts[path.name] = path.read_text(errors="replace")
    assert "diskinfo.log" in texts and "diskinfo.jsonl" in texts
    for where, text in texts.items():
        assert SECRET not in text, f"the token leaked into {where}"


def run_dashboard_queries(prom: Prometheus, dev: str, at: float) -> list[tuple[str, str, list]]:
    """Every dashboard query, variables filled in as Grafana would, through the real server."""
    dash = json.loads((ROOT / "monitoring/grafana/dashboard.json").read_text())
    queries = []

    def walk(panels):
        for p in panels:
            queries.extend((p["title"], t["expr"]) for t in p.get("targets", []))
            walk(p.get("panels", []))

    walk(dash["panels"])
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            inner = re.fullmatch(r"label_values\((.*),\s*\w+\)", var["query"]["query"])
            queries.append((f"${var['name']}", inner.group(1)))
    out = []
    for title, expr in queries:
        filled = (
            expr.replace("$__rate_interval", "20s")
            .replace('"$node"', '".+"')
            .replace('"$device"', f'"{dev}"')
            .replace('"$training_job"', '".*"')
        )
        out.append((title, filled, prom.query(filled, at)))
    return out
