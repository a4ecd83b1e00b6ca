"""The device baseline survives the container (a bench costs minutes a user pays once):
`docker exec -u jovyan C diskinfo bench` in one container stores it under the mounted logs
directory, keyed by the disk's identity; the monitor of that container takes it up at once,
and the monitor of a second, fresh container sharing the logs directory uses it from its
first records.

The data sits on its own ext4 loop device, so the watched top device is that loop device in
both containers, and "N% of its measured M MB/s" in the verdict's evidence says the monitor
judged it against the stored bandwidth.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.loopdev import NEEDS_ROOT, data_and_logs

pytestmark = [pytest.mark.image, pytest.mark.skipif(NEEDS_ROOT, reason="loop devices need root")]

ENV = {"DISKINFO_PATHS": "/workspace/data", "DISKINFO_INTERVAL": "1"}


def _records(jsonl: Path) -> list[dict]:
    if not jsonl.exists():
        return []
    return [json.loads(line) for line in jsonl.read_text().splitlines() if line.endswith("}")]


def _judged_against(records: list[dict], dev: str) -> list[str]:
    """The evidence lines about `dev` that cite a measured bandwidth."""
    return [
        e
        for r in records
        if r.get("verdict")
        for e in r["verdict"]["evidence"]
        if e.startswith(f"{dev}:") and "of its measured" in e
    ]


def test_bench_in_one_container_is_used_by_the_next(container, tmp_path, wait_until):
    with data_and_logs(tmp_path, 16) as (mnt, dev, logs):
        volumes = {
            str(mnt): {"bind": "/workspace/data", "mode": "ro"},
            str(logs): {"bind": "/workspace/logs", "mode": "rw"},
        }
        jsonl, store = logs / "diskinfo.jsonl", logs / "diskinfo-baseline.json"

        first = container(env=ENV, volumes=volumes)
        wait_until(lambda: len(_records(jsonl)) >= 2, 90, lambda: first.logs()[-3000:])
        assert not _judged_against(_records(jsonl), dev)  # no baseline yet
        code, out = first.exec(  # as the docs say: -u jovyan
            "diskinfo bench /workspace/data/data.bin --seconds 0.5 --size 16M",
            user="jovyan",
            timeout=60,
        )
        assert code == 0, out
        assert "stored in /workspace/logs/diskinfo-baseline.json" in out, out
        entry = json.loads(store.read_text())["devices"][0]
        assert entry["device"] == dev and entry["identity"]["wwid"].startswith("loop:")
        measured = f"of its measured {entry['seq_read_mb_s']:.0f} MB/s"
        # the running monitor re-reads the changed store within RESTAT_S (5 s)
        wait_until(
            lambda: any(measured in e for e in _judged_against(_records(jsonl), dev)),
            30,
            lambda: f"the first container's monitor never used the baseline: {out}",
        )
        first.obj.stop(timeout=10)
        jsonl.rename(logs / "first.jsonl")

        second = container(env=ENV, volumes=volumes)
        wait_until(lambda: len(_records(jsonl)) >= 2, 90, lambda: second.logs()[-3000:])
        second.obj.stop(timeout=10)
        records = _records(jsonl)
        judged = _judged_against(records, dev)
        print(judged[:1])
        assert len(judged) == len([r for r in records if r.get("verdict")]), records[:1]
        assert all(measured in e for e in judged)
