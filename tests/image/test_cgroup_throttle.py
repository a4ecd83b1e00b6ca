"""A container of the image started with `--device-read-iops` on the device behind its data:
the monitor inside (supervisord, unprivileged) finds its own cgroup, reports the container's
reads at the cap with the limit, calls them throttled, and exports the diskinfo_cgroup_* series.

dd inside the container reads the data with O_DIRECT (4 KiB, one I/O each), so the cap, not
the page cache, sets its pace; the device itself (a fresh ext4 loop) stays nearly idle.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.helpers.loopdev import NEEDS_ROOT, data_and_logs

pytestmark = [pytest.mark.image, pytest.mark.skipif(NEEDS_ROOT, reason="loop devices need root")]

LIMIT = 300  # read IOPS
READS = 2400  # about 8 s at the cap


def test_the_monitor_sees_its_containers_throttle(container, tmp_path, wait_until):
    with data_and_logs(tmp_path, 12) as (mnt, dev, logs):
        running = container(
            env={"DISKINFO_PATHS": "/workspace/data", "DISKINFO_INTERVAL": "1"},
            volumes={
                str(mnt): {"bind": "/workspace/data", "mode": "ro"},
                str(logs): {"bind": "/workspace/logs", "mode": "rw"},
            },
            device_read_iops=[{"Path": f"/dev/{dev}", "Rate": LIMIT}],
        )
        jsonl = logs / "diskinfo.jsonl"
        wait_until(
            lambda: jsonl.exists() and jsonl.read_text().count("\n") >= 2,
            90,
            lambda: f"no records from the monitor; logs:\n{running.logs()[-3000:]}",
        )
        code, out = running.exec(
            f"dd if=/workspace/data/data.bin of=/dev/null bs=4k count={READS} iflag=direct",
            timeout=60,
        )
        assert code == 0, out
        port = running.ports["METRICS_PORT"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        wait_until(lambda: "THROTTLED" in (logs / "diskinfo.log").read_text(), 10, "no log line")

    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    ours = [c for r in records for c in r["cgroup_io"] if c["device"] == dev]
    assert ours, [r["warnings"] for r in records]
    assert all(c["read_iops"] == LIMIT and c["version"] in (1, 2) for c in ours)
    busy = [c for c in ours if c["read_ios_s"] > LIMIT / 2]
    assert len(busy) >= 4, [c["read_ios_s"] for c in ours]
    assert all(c["read_ios_s"] <= LIMIT * 1.1 for c in busy[1:-1])  # the cap holds
    assert sum(c["throttled"] for c in busy) >= len(busy) - 2
    device = [d for r in records for d in r["devices"] if d["device"] == dev]
    util = max(d["util"] for d in device) if device else None
    print("cgroup r/s", [round(c["read_ios_s"]) for c in busy], "device %util max", util)
    assert device and max(d["util"] for d in device) < 50  # the device itself is not busy
    assert f'diskinfo_cgroup_read_limit_iops{{device="{dev}"}} {LIMIT:.1f}' in metrics
    assert f'diskinfo_cgroup_read_ios_total{{device="{dev}"}}' in metrics
