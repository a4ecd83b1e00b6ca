"""The container's own I/O and its throttle, on the real kernel: a cgroup-v1 blkio group capped
at LIMIT read IOPS on a fresh ext4 loop device, dd reading 4 KiB direct I/O inside it.

The collector must count exactly dd's bytes (the cgroup counts bios: 4 KiB O_DIRECT reads of
an ext4 file are one bio each, plus a few metadata reads), report the cap, and call the group
throttled while dd runs at it. The second test runs `diskinfo watch` itself inside the group,
so the monitor finds its own cgroup from /proc/self like it does in a container.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from diskinfo.collectors.cgroup import CgroupCollector
from diskinfo.collectors.watched import WatchedPaths
from diskinfo.record import IntervalRecord
from diskinfo.sources.cgroup import Location
from tests.helpers.loopdev import NEEDS_ROOT, Blkio, ext4_loop

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(
        NEEDS_ROOT or not (Blkio.ROOT / "cgroup.procs").exists(), reason="root and cgroup v1 blkio"
    ),
]

LIMIT = 400  # read IOPS
READS = 1600  # 4 KiB each: about 4 s at the cap
BS = 4096


@pytest.fixture
def capped(tmp_path):
    with ext4_loop(tmp_path, 64) as (mnt, name):
        data = mnt / "data.bin"
        subprocess.run(
            ["dd", "if=/dev/urandom", f"of={data}", "bs=1M", "count=8", "conv=fsync"],
            check=True,
            capture_output=True,
        )
        devno = Path(f"/sys/class/block/{name}/dev").read_text().strip()
        group = Blkio(f"diskinfo-test-cgroup-io-{os.getpid()}", devno, read_iops=LIMIT)
        try:
            yield group, data, name, devno
        finally:
            group.remove()


def reader(group: Blkio, data: Path) -> subprocess.Popen[str]:
    """dd, moved into the group before it execs (so every read of it is the group's)."""
    return subprocess.Popen(
        ["dd", f"if={data}", "of=/dev/null", f"bs={BS}", f"count={READS}", "iflag=direct"],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: group.add(os.getpid()),
    )


def dd_bytes(stderr: str) -> int:
    """dd's own count: '6553600 bytes (6.6 MB, 6.2 MiB) copied, 4.1 s, 1.6 MB/s'."""
    line = next(x for x in stderr.splitlines() if " bytes" in x and "copied" in x)
    return int(line.split()[0])


def test_collector_counts_dd_bytes_and_sees_the_throttle(capped):
    group, data, name, devno = capped
    loc = Location(1, str(group.path), "/" + group.path.name)
    collector = CgroupCollector(WatchedPaths.of_devices([name]), lambda: [loc])
    collector.start()
    last = time.monotonic()
    dd = reader(group, data)
    records = []
    while True:
        done = dd.poll() is not None
        time.sleep(1.0)
        now = time.monotonic()
        rec = IntervalRecord(ts=time.time(), elapsed_s=now - last)
        last = now
        collector.fill(rec)
        records.append(rec)
        if done:
            break
    collector.stop()
    _, err = dd.communicate()
    assert dd.returncode == 0, err
    assert all(not r.warnings for r in records), [r.warnings for r in records]
    figs = [r.cgroup_io[0] for r in records]
    assert all(f.majmin == devno and f.read_iops == LIMIT for f in figs)
    assert all(f.read_bps is None and f.write_iops is None for f in figs)
    counted = sum(f.read_bytes_s * r.elapsed_s for f, r in zip(figs, records, strict=True))
    print(
        f"cgroup counted {counted:.0f} B, dd {READS * BS} B; "
        f"r/s {[round(f.read_ios_s) for f in figs]}"
    )
    assert dd_bytes(err) == READS * BS
    assert counted == pytest.approx(READS * BS, rel=0.03), (counted, READS * BS)
    # the intervals in which dd ran whole: at the cap, and said so
    full = figs[1:-2]
    assert len(full) >= 2
    for f in full:
        assert f.read_ios_s == pytest.approx(LIMIT, rel=0.1), f
        assert f.throttled and f.throttled_by == ["read_iops"]
    assert not figs[-1].throttled  # dd has finished: no reads, no throttling


def test_watch_in_the_group_finds_its_own_cgroup(capped, tmp_path):
    group, data, name, _devno = capped
    logs = tmp_path / "logs"
    watch = subprocess.Popen(
        [
            *(sys.executable, "-m", "diskinfo.cli", "watch", str(data.parent)),
            *("--interval", "1", "--count", "4", "--log-dir", str(logs)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: group.add(os.getpid()),
    )
    time.sleep(1.5)  # the monitor is sampling
    dd = reader(group, data)
    _, err = dd.communicate(timeout=60)
    assert dd.returncode == 0, err
    _, werr = watch.communicate(timeout=60)
    assert watch.returncode == 0, werr
    records = [json.loads(x) for x in (logs / "diskinfo.jsonl").read_text().splitlines()]
    entries = [c for r in records for c in r["cgroup_io"] if c["device"] == name]
    assert entries and all(c["cgroup"] == str(group.path) for c in entries)
    assert all(c["version"] == 1 and c["read_iops"] == LIMIT for c in entries)
    assert any(c["throttled"] for c in entries)
    text = (logs / "diskinfo.log").read_text()
    assert f"[Cgroup] {name}:" in text and "riops=400" in text and "THROTTLED(read_iops)" in text


READER = """
import os, random, sys
import torch.utils.data
import diskinfo.torch

path, n = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # cold, and no readahead: one 4 KiB
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # read from the device per sample
blocks = random.Random(0).sample(range(os.fstat(fd).st_size // 4096), n)


class Blocks(torch.utils.data.Dataset):
    def __len__(self):
        return n

    def __getitem__(self, i):
        return len(os.pread(fd, 4096, blocks[i] * 4096))


for _ in diskinfo.torch.watch(torch.utils.data.DataLoader(Blocks(), batch_size=8)):
    pass
"""


def test_a_loop_waiting_on_the_cap_gets_the_cgroup_verdict(capped, tmp_path):
    """A DataLoader (wrapped with diskinfo.torch.watch) reading cold 4 KiB samples inside the
    capped group, `diskinfo watch` in the same group: the verdict names the cgroup's cap."""
    group, data, _name, _devno = capped
    logs, state = tmp_path / "logs", tmp_path / "state"
    state.mkdir()
    env = dict(os.environ, DISKINFO_STATE_DIR=str(state))
    watch = subprocess.Popen(
        [
            *(sys.executable, "-m", "diskinfo.cli", "watch", str(data.parent)),
            *("--interval", "1", "--log-dir", str(logs)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: group.add(os.getpid()),
    )
    try:
        reader = subprocess.run(
            [sys.executable, "-c", READER, str(data), str(READS)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            preexec_fn=lambda: group.add(os.getpid()),
        )
        assert reader.returncode == 0, reader.stderr
        time.sleep(1.5)  # the last loader figures reach the monitor
    finally:
        watch.terminate()
        _, werr = watch.communicate(timeout=30)
    records = [json.loads(x) for x in (logs / "diskinfo.jsonl").read_text().splitlines()]
    reading = [r for r in records if r["loader"] and r["loader"]["batches"] > 0]
    verdicts = [r["verdict"] for r in reading if r["verdict"]]
    # the loop's first interval may be "unknown (starting)", without fixes (docs/verdicts.md)
    print([(v["verdict"], v["cause"], v["fixes"][:1]) for v in verdicts])
    capped_ones = [
        v
        for v in verdicts
        if v["verdict"] == "input-bound: disk"
        and v["summary"].startswith(f"this container's reads are capped by its cgroup at {LIMIT}")
        and "the device itself is not busy" in v["summary"]
        and v["fixes"][0].startswith("raise or remove this container's cgroup read limit")
    ]
    assert len(capped_ones) >= 2 and len(capped_ones) >= len(verdicts) - 2, werr
