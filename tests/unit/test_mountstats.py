"""/proc/self/mountstats parsing and nfsiostat's figures; hypothesis fuzzing."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo.collectors import rates
from diskinfo.collectors.nfs import NfsCollector
from diskinfo.record import IntervalRecord
from diskinfo.sources import mountstats
from diskinfo.sources.mountstats import BYTES_FIELDS, NfsMount, OpStats, parse
from tests.helpers.fixtures import text

FIXTURE = text("nfs", "proc/self/mountstats")


def test_fixture_nfs4_and_nfs3_mounts():
    mounts, errors = parse(FIXTURE)
    assert not errors
    assert [m.mountpoint for m in mounts] == ["/mnt/datasets", "/mnt/scratch"]
    v4 = mounts[0]
    assert (v4.source, v4.server, v4.fstype, v4.statvers, v4.age) == (
        "nas01:/export/datasets",
        "nas01",
        "nfs4",
        "1.1",
        86412,
    )
    assert v4.bytes["normal_read"] == 98234112334
    assert v4.ops["READ"] == OpStats(
        93712, 93714, 0, 14243504, 98245981222, 1032, 2211203, 2245120, 0
    )
    v3 = mounts[1]
    assert v3.ops["WRITE"].ntrans == 1205 and v3.ops["READ"].errors == 0  # 8-field op lines


def bump(m: NfsMount, read_ops=0, read_bytes=0, rtt=0, exe=0, ntrans=0, age=5) -> NfsMount:
    read = m.ops["READ"]
    new = dataclasses.replace(
        read,
        ops=read.ops + read_ops,
        ntrans=read.ntrans + read_ops + ntrans,
        rtt_ms=read.rtt_ms + rtt,
        execute_ms=read.execute_ms + exe,
    )
    b = dict(m.bytes)
    b["normal_read"] += read_bytes
    return dataclasses.replace(m, age=m.age + age, bytes=b, ops={**m.ops, "READ": new})


def test_nfsiostat_figures():
    prev = parse(FIXTURE)[0][0]
    cur = bump(prev, read_ops=1000, read_bytes=1000 * 2**20, rtt=2500, exe=3000, ntrans=7)
    fig = rates.nfs_figures(prev, cur, 5.0)
    assert fig.read_ops_s == pytest.approx(200.0)
    assert fig.read_bytes_s == pytest.approx(200 * 2**20)
    assert fig.read_rtt_ms == pytest.approx(2.5) and fig.read_exe_ms == pytest.approx(3.0)
    assert fig.retrans == 7 and fig.write_ops_s == 0.0
    assert fig.counters["read_ops"] == cur.ops["READ"].ops


def test_remount_is_a_new_baseline():
    prev = parse(FIXTURE)[0][0]
    assert rates.nfs_figures(prev, dataclasses.replace(prev, age=3), 5.0) is None


def test_collector_fills_nfs_and_survives_a_broken_file():
    snaps = [FIXTURE, FIXTURE.replace("86412", "86417"), OSError("gone"), "device garbage"]
    clock = iter([0.0, 5.0, 10.0, 15.0])

    def read():
        s = snaps.pop(0)
        if isinstance(s, Exception):
            raise s
        return s

    c = NfsCollector(["/mnt/datasets"], read=read, clock=lambda: next(clock))
    c.start()
    r1 = IntervalRecord(ts=0, elapsed_s=5)
    c.fill(r1)
    assert [f.mount for f in r1.nfs] == ["/mnt/datasets"] and r1.nfs[0].read_ops_s == 0.0
    r2 = IntervalRecord(ts=0, elapsed_s=5)
    c.fill(r2)
    assert not r2.nfs and "cannot read" in r2.warnings[0]
    r3 = IntervalRecord(ts=0, elapsed_s=5)
    c.fill(r3)
    assert not r3.nfs and any("not in" in w for w in r3.warnings)


@pytest.mark.parametrize(
    "bad",
    [
        "device a:/b mounted on /m with fstype nfs4\n\tbytes:\t1 2 3\n",
        "device a:/b mounted on /m with fstype nfs4\n\tage:\tx\n",
        "device a:/b mounted on /m with fstype nfs4\n\tper-op statistics\n\tREAD: 1 2 3\n",
        "device a:/b mounted at /m\n",
    ],
)
def test_malformed_lines_are_reported(bad):
    _, errors = parse(bad)
    assert errors


@st.composite
def nfs_mounts(draw):
    word = st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)
    n = st.integers(0, 2**63)
    ops = draw(
        st.dictionaries(
            st.from_regex(r"[A-Z_]{2,10}", fullmatch=True),
            st.builds(OpStats, n, n, n, n, n, n, n, n, n),
            max_size=4,
        )
    )
    return NfsMount(
        source=draw(word) + ":/" + draw(word),
        mountpoint="/" + draw(word),
        fstype=draw(st.sampled_from(["nfs", "nfs4"])),
        statvers="1.1",
        age=draw(n),
        bytes=dict(zip(BYTES_FIELDS, draw(st.lists(n, min_size=8, max_size=8)), strict=True)),
        ops=ops,
    )


@given(nfs_mounts())
def test_round_trip(m):
    mounts, errors = parse(m.to_text())
    assert not errors and mounts == [m]


@given(st.text())
def test_garbage_never_raises(s):
    mounts, errors = parse(s)
    assert isinstance(mounts, list) and isinstance(errors, list)


SECTIONS = [
    "device a:/b mounted on /m with fstype nfs4",
    "\tage:\t1",
    "\tbytes:\t1 2 3 4 5 6 7 8",
    "\tper-op statistics",
    "\tREAD: 1 2 3 4 5 6 7 8",
    "\tREAD: x",
    "\tbytes: -1",
]


@given(st.lists(st.sampled_from(SECTIONS)))
def test_shuffled_sections(lines):
    mounts, errors = parse("\n".join(lines))  # reports bad lines, never raises
    assert all(m.fstype == "nfs4" for m in mounts) and isinstance(errors, list)


def test_live_file_parses():
    mounts, errors = parse(mountstats.read())
    assert not errors and isinstance(mounts, list)
