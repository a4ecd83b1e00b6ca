"""`diskinfo resolve` on this machine's real kernel: loop devices with ext4, xfs and a
two-device btrfs, bind mounts, a prefix trap, stacked and hidden mounts, loop in loop."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import tools
from tests.helpers.loopdev import NEEDS_ROOT, loop_device, mounted

pytestmark = [pytest.mark.system, pytest.mark.skipif(NEEDS_ROOT, reason="needs root, losetup")]


def mkfs(kind: str, *devs: str) -> None:
    tool = tools.find(f"mkfs.{kind}")
    args = {
        "ext4": ["-q", "-F"],
        "xfs": ["-q", "-f"],
        "btrfs": ["-q", "-f", "-d", "raid1", "-m", "raid1"],
    }
    subprocess.run([tool, *args[kind], *devs], check=True, capture_output=True)


def resolve(*paths: str) -> list[dict]:
    p = subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", "resolve", "--json", *paths],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    return out if isinstance(out, list) else [out]


def devno(path: str) -> str:
    st = os.stat(path)
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


def rdev(dev: str) -> str:
    st = os.stat(dev)
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("resolve")
    with contextlib.ExitStack() as stack:
        ext = stack.enter_context(loop_device(str(base / "ext.img"), 64))
        xfs = stack.enter_context(loop_device(str(base / "xfs.img"), 320))
        b1 = stack.enter_context(loop_device(str(base / "b1.img"), 160))
        b2 = stack.enter_context(loop_device(str(base / "b2.img"), 160))
        mkfs("ext4", ext)
        mkfs("xfs", xfs)
        mkfs("btrfs", b1, b2)
        m = base / "m"
        stack.enter_context(mounted(ext, str(m / "data")))
        stack.enter_context(mounted(xfs, str(m / "data2")))  # "/data" is a prefix of it
        stack.enter_context(mounted(b1, str(m / "btr")))
        (m / "data" / "train").mkdir()
        (m / "data" / "train" / "x.bin").write_bytes(b"x" * 4096)
        stack.enter_context(mounted(str(m / "data" / "train"), str(m / "bind"), "--bind"))
        # loop in loop: an image file on the ext4 filesystem, itself on a loop device
        inner = stack.enter_context(loop_device(str(m / "data" / "inner.img"), 16))
        mkfs("ext4", inner)
        stack.enter_context(mounted(inner, str(m / "inner")))
        # hidden: ext4 at hid/sub, then a tmpfs over hid hides it
        stack.enter_context(mounted(ext, str(m / "hid" / "sub")))
        stack.enter_context(mounted("tmpfs", str(m / "hid"), "-t", "tmpfs"))
        (m / "hid" / "sub").mkdir()
        # stacked: two filesystems on one mount point, the last one is visible
        stack.enter_context(mounted(ext, str(m / "stack")))
        stack.enter_context(mounted(xfs, str(m / "stack")))
        yield {"m": m, "ext": ext, "xfs": xfs, "b1": b1, "b2": b2, "inner": inner}


def name(dev: str) -> str:
    return os.path.basename(dev)


def test_ext4_xfs_and_the_prefix_trap(world):
    m = world["m"]
    data, data2 = resolve(str(m / "data" / "train" / "x.bin"), str(m / "data2"))
    assert data["device"]["name"] == name(world["ext"])
    assert data["device"]["devno"] == rdev(world["ext"]) == devno(str(m / "data"))
    assert data["mount"]["fstype"] == "ext4"
    assert data2["device"]["name"] == name(world["xfs"]) and data2["mount"]["fstype"] == "xfs"
    assert data["device"]["kind"] == "loop" and data["device"]["loop_backing"].endswith("ext.img")
    # the backing file lives on this machine's root disk
    root = resolve("/")[0]
    assert data["backing"]["device"]["name"] == root["device"]["name"]


def test_bind_mount_shows_its_root_and_the_same_device(world):
    (res,) = resolve(str(world["m"] / "bind" / "x.bin"))
    assert res["mount"]["root"] == "/train" and res["device"]["name"] == name(world["ext"])


def test_btrfs_on_two_devices(world):
    (res,) = resolve(str(world["m"] / "btr"))
    assert res["kind"] == "btrfs" and res["mount"]["devno"].startswith("0:")
    assert sorted(res["watch_devices"]) == sorted([name(world["b1"]), name(world["b2"])])


def test_loop_in_loop_reaches_the_physical_disk(world):
    (res,) = resolve(str(world["m"] / "inner"))
    assert res["device"]["name"] == name(world["inner"])
    assert res["backing"]["device"]["name"] == name(world["ext"])
    assert res["backing"]["backing"]["device"]["name"] == resolve("/")[0]["device"]["name"]


def test_hidden_and_stacked_mounts(world):
    hidden, stacked = resolve(str(world["m"] / "hid" / "sub"), str(world["m"] / "stack"))
    assert hidden["kind"] == "memory"  # the tmpfs on top, not the ext4 hidden under it
    assert stacked["device"]["name"] == name(world["xfs"])


def test_text_output_and_memory_explanation(world):
    p = subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", "resolve", str(world["m"] / "data2"), "/dev/shm"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0
    assert f"device   {name(world['xfs'])} [{rdev(world['xfs'])}]" in p.stdout
    assert "memory-backed" in p.stdout and "watch    nothing" in p.stdout


def test_watch_follows_the_resolved_devices(world, tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "diskinfo.cli", "watch", str(world["m"] / "btr"),
         str(world["m"] / "data2"), "--interval", "0.2", "--count", "2",
         "--log-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    last = json.loads(Path(tmp_path / "diskinfo.jsonl").read_text().splitlines()[-1])
    got = {d["device"] for d in last["devices"]}
    assert {name(world["b1"]), name(world["b2"]), name(world["xfs"])} <= got


def test_a_block_device_node_stands_for_the_device(world):
    (res,) = resolve(world["xfs"])
    assert res["node"] and res["device"]["name"] == name(world["xfs"])
    assert res["watch_devices"][0] == name(world["xfs"])
