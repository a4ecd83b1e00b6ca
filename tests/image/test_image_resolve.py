"""`diskinfo resolve` and `diskinfo watch` inside a real container of the image: the overlay
root, a bind-mounted dataset on its own (loop) disk, bind-mounted files, /dev/shm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.image,
    pytest.mark.skipif(
        os.geteuid() != 0 or not shutil.which("losetup"), reason="a loop device needs root"
    ),
]


@pytest.fixture
def dataset_disk(tmp_path: Path):
    img = tmp_path / "data.img"
    with open(img, "wb") as f:
        f.truncate(64 * 2**20)
    dev = subprocess.run(
        ["losetup", "--find", "--show", str(img)], check=True, capture_output=True, text=True
    ).stdout.strip()
    mnt = tmp_path / "data"
    mnt.mkdir()
    try:
        subprocess.run(["mkfs.ext4", "-q", "-F", dev], check=True, capture_output=True)
        subprocess.run(["mount", dev, str(mnt)], check=True)
        (mnt / "train").mkdir()
        (mnt / "train" / "shard-000.bin").write_bytes(os.urandom(8 * 2**20))
        yield dev, mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
        subprocess.run(["losetup", "-d", dev], check=False)


def host_device(path: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", "resolve", "--json", path],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)["device"]["name"]


def test_resolve_and_watch_inside_a_container(container, dataset_disk):
    dev, mnt = dataset_disk
    loop = os.path.basename(dev)
    running = container(
        "sleep", "120", volumes={str(mnt / "train"): {"bind": "/workspace/data", "mode": "ro"}}
    )
    code, out = running.exec("diskinfo resolve --json / /workspace/data /etc/hosts /dev/shm")
    assert code == 0, out
    root, data, hosts, shm = json.loads(out)
    docker_disk = host_device("/var/lib/docker")
    assert root["kind"] == "overlay" and root["inferred"]
    assert root["device"]["name"] == docker_disk
    assert data["device"]["name"] == loop and data["mount"]["root"] == "/train"
    assert "not visible from this mount namespace" in data["note"]
    assert hosts["device"]["name"] == docker_disk
    assert shm["kind"] == "memory" and not shm["measurable"]

    # the monitor inside the container sees the reads of the dataset on its disk
    code, out = running.exec(
        "diskinfo watch /workspace/data --interval 1 --count 3 --log-dir /tmp/w & "
        "sleep 1.3; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; "
        "dd if=/workspace/data/shard-000.bin of=/dev/null bs=1M iflag=direct 2>/dev/null; "
        "wait; cat /tmp/w/diskinfo.jsonl",
        timeout=60,
    )
    assert code == 0, out
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    read = sum(d["read_bytes"] for r in records for d in r["devices"] if d["device"] == loop)
    assert read >= 8 * 2**20, records[-1]
