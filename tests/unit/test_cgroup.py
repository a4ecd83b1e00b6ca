"""cgroup v1/v2 block I/O files: parsers on captured formats, locating the own cgroup, fuzzing,
and the collector's rates, limits, throttling and re-baselining on fixture directories."""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo.collectors.cgroup import PRESSURE_S, CgroupCollector
from diskinfo.collectors.watched import WatchedPaths
from diskinfo.record import IntervalRecord
from diskinfo.sources import ParseError, cgroup, mountinfo
from diskinfo.sources.cgroup import Location
from diskinfo.sources.sysfs import SysFs
from tests.helpers.fixtures import text

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "cgroup"
DOCKER_ID = "10f347fd8ba51614ebc4e2a583b30c8d2a907b2cc58fd6bf868976a23b2cd679"


def fix(version: str, name: str) -> str:
    return (FIX / version / name).read_text()


# --- parsers ------------------------------------------------------------------------


def test_v1_counters_keep_read_write_discard_per_device():
    got = cgroup.parse_v1_stat(fix("v1", "blkio.throttle.io_service_bytes"), "bytes")
    assert got["7:3"] == {"read_bytes": 40960000, "write_bytes": 0, "discard_bytes": 0}
    assert got["254:0"]["read_bytes"] == 121255483392
    ios = cgroup.parse_v1_stat(fix("v1", "blkio.throttle.io_serviced"), "ios")
    assert ios["7:3"]["read_ios"] == 10000 and ios["254:0"]["write_ios"] == 755130


def test_v1_limits_and_empty_files():
    assert cgroup.parse_v1_limit(fix("v1", "blkio.throttle.read_iops_device")) == {"7:3": 1000}
    assert cgroup.parse_v1_limit(fix("v1", "blkio.throttle.read_bps_device")) == {
        "254:0": 104857600,
        "7:3": 52428800,
    }
    assert cgroup.parse_v1_limit("") == {} and cgroup.parse_v1_limit("8:0 0\n") == {}


def test_v2_io_stat_skips_iocost_keys():
    got = cgroup.parse_io_stat(fix("v2", "io.stat"))
    assert got["8:16"] == {
        "read_bytes": 1459200,
        "write_bytes": 0,
        "read_ios": 192,
        "write_ios": 0,
        "discard_bytes": 0,
        "discard_ios": 0,
    }
    assert got["259:0"]["read_ios"] == 1000000


def test_v2_io_max_and_pressure():
    limits = cgroup.parse_io_max(fix("v2", "io.max"))
    assert limits["259:0"] == {
        "read_bps": None,
        "write_bps": None,
        "read_iops": 1000,
        "write_iops": None,
    }
    assert limits["8:16"]["read_bps"] == 2097152 and limits["8:16"]["write_iops"] == 120
    psi = cgroup.parse_pressure(fix("v2", "io.pressure"))
    assert psi["some_avg10"] == 63.52 and psi["full_avg10"] == 61.07
    assert psi["full_total"] == 79012345


def test_a_pressure_line_of_an_unknown_kind_is_skipped_not_the_sample():
    """A kernel may add PSI kinds: one new line must not drop io.pressure."""
    psi = cgroup.parse_pressure(text("kernel-variants", "io.pressure"))
    assert psi["some_avg10"] == 12.5 and psi["full_avg10"] == 10.0
    assert not any(key.startswith("stall") for key in psi)


@pytest.mark.parametrize(
    "psi", [fix("v2", "io.pressure"), text("kernel-variants", "io.pressure"), "some avg10=1.5"]
)
def test_the_monitors_avg10_lookup_agrees_with_the_full_parser(psi):
    full = cgroup.parse_pressure(psi)
    assert cgroup.pressure_avg10(psi) == {
        k: full[k] for k in ("some_avg10", "full_avg10") if k in full
    }


def test_the_watched_devices_lookup_agrees_with_the_full_v1_parse():
    stat = (
        "8:1 Read 5\n8:1 Write 6\n18:1 Read 7\n18:1 Write 8\n8:1 Sync 11\n8:1 Discard 2\nTotal 9\n"
    )
    full = cgroup.parse_v1_stat(stat, "ios")
    for devnos in (["8:1"], ["18:1"], ["8:1", "18:1"], ["9:9"]):
        assert cgroup.parse_v1_stat(stat, "ios", devnos) == {
            d: full[d] for d in devnos if d in full
        }


def test_proc_self_cgroup_v1_and_v2_lines():
    got = cgroup.parse_proc_cgroup(fix("v1", "proc_self_cgroup"))
    blkio = next(m for m in got if "blkio" in m.controllers)
    assert blkio.path == f"/docker/{DOCKER_ID}" and blkio.hierarchy == 7
    assert next(m for m in got if m.v2).path == f"/docker/{DOCKER_ID}"
    assert cgroup.parse_proc_cgroup("3:cpu,cpuacct:/a:b\n")[0].path == "/a:b"


def _locate(version: str) -> list[Location]:
    mounts, errors = mountinfo.parse(fix(version, "mountinfo"))
    assert not errors
    return cgroup.locate(cgroup.parse_proc_cgroup(fix(version, "proc_self_cgroup")), mounts)


def test_locate_in_a_v1_container_joins_the_mount_root():
    # docker mounts the container's own blkio group (root /docker/ID) at /sys/fs/cgroup/blkio
    # captured in `docker run` here: the 0:: line has no cgroup2 mount to go with it
    assert _locate("v1") == [Location(1, "/sys/fs/cgroup/blkio", f"/docker/{DOCKER_ID}")]


def test_locate_with_a_private_cgroup_namespace_is_the_mount_point():
    assert _locate("v2") == [Location(2, "/sys/fs/cgroup", "/")]


def test_locate_on_a_host():
    mounts, _ = mountinfo.parse(
        "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
        "38 31 0:35 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw,blkio\n"
    )
    member = cgroup.parse_proc_cgroup("7:blkio:/user.slice\n0::/user.slice/session-1.scope\n")
    assert cgroup.locate(member, mounts) == [
        Location(
            2, "/sys/fs/cgroup/unified/user.slice/session-1.scope", "/user.slice/session-1.scope"
        ),
        Location(1, "/sys/fs/cgroup/blkio/user.slice", "/user.slice"),
    ]


@pytest.mark.parametrize(
    "parser,text",
    [
        (cgroup.parse_io_stat, "8:x rbytes=1"),
        (cgroup.parse_io_stat, "8:0 rbytes"),
        (cgroup.parse_io_stat, "8:0 rbytes=-1"),
        (cgroup.parse_io_max, "8:0 rbps=1 foo=2"),
        (cgroup.parse_pressure, "some avg10=nan"),
        (cgroup.parse_pressure, "full avg10=x"),
        (cgroup.pressure_avg10, "some avg10=nan"),
        (cgroup.pressure_avg10, "full avg10=x total=1"),
        (lambda t: cgroup.parse_v1_stat(t, "bytes", ["8:0"]), "8:0 Read -4"),
        (lambda t: cgroup.parse_v1_stat(t, "bytes"), "8:0 Read"),
        (lambda t: cgroup.parse_v1_stat(t, "bytes"), "8:0 Frob 3"),
        (cgroup.parse_v1_limit, "8:0 1 2"),
        (cgroup.parse_proc_cgroup, "7:blkio"),
        (cgroup.parse_proc_cgroup, "x:blkio:/"),
    ],
)
def test_malformed_text_raises_parse_error(parser, text):
    with pytest.raises(ParseError):
        parser(text)


PARSERS = [
    cgroup.parse_io_stat,
    cgroup.parse_io_max,
    cgroup.parse_pressure,
    cgroup.pressure_avg10,
    cgroup.parse_v1_limit,
    cgroup.parse_proc_cgroup,
    lambda t: cgroup.parse_v1_stat(t, "ios"),
    lambda t: cgroup.parse_v1_stat(t, "ios", ["8:0", "259:1"]),
]


@given(st.text(), st.sampled_from(PARSERS))
def test_garbage_never_raises_anything_but_parse_error(text, parser):
    with contextlib.suppress(ParseError):
        parser(text)


token = st.one_of(
    st.sampled_from(["8:0", "259:1", "Read", "Write", "Total", "rbps=max", "some", "full"]),
    st.builds(
        lambda k, v: f"{k}={v}",
        st.sampled_from(["rbytes", "riops", "avg10", "x"]),
        st.integers(-3, 2**70),
    ),
    st.integers(-5, 2**70).map(str),
    st.text(max_size=4),
)


@given(st.lists(st.lists(token, max_size=8).map(" ".join), max_size=5), st.sampled_from(PARSERS))
def test_near_miss_files(lines, parser):
    try:
        got = parser("\n".join(lines))
    except ParseError:
        return
    if isinstance(got, dict):  # whatever parses is non-negative
        for value in got.values():
            inner = value.values() if isinstance(value, dict) else [value]
            assert all(v is None or v >= 0 for v in inner)


# --- the collector ------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    """A v1 cgroup directory (the fixture's files) and a /sys with loop3 = 7:3."""
    group = tmp_path / "blkio" / "docker" / "ab"
    group.mkdir(parents=True)
    for f in (FIX / "v1").glob("blkio.*"):
        shutil.copy(f, group / f.name)
    (group / "cgroup.procs").write_text("1\n")
    block = tmp_path / "sys" / "class" / "block" / "loop3"
    block.mkdir(parents=True)
    (block / "dev").write_text("7:3\n")
    return group, SysFs(str(tmp_path / "sys"))


def grow(group: Path, reads: int, nbytes: int) -> None:
    """Add reads to 7:3 in the v1 counter files, as the kernel would."""
    for name, add, key in (("io_serviced", reads, "Read"), ("io_service_bytes", nbytes, "Read")):
        path = group / f"blkio.throttle.{name}"
        lines = []
        for line in path.read_text().splitlines():
            parts = line.split()
            if parts[:2] == ["7:3", key]:
                line = f"7:3 {key} {int(parts[2]) + add}"
            lines.append(line)
        path.write_text("\n".join(lines) + "\n")


def collector(
    group: Path, sysfs: SysFs, version: int = 1, clock: Callable[[], float] = time.monotonic
) -> CgroupCollector:
    loc = Location(version, str(group), "/docker/ab")
    devices = WatchedPaths.of_devices(["loop3", "gone0"])
    return CgroupCollector(devices, lambda: [loc], sysfs=sysfs, clock=clock)


def test_rates_limits_and_throttled(tree):
    group, sysfs = tree
    c = collector(group, sysfs)
    c.start()
    grow(group, reads=2000, nbytes=2000 * 4096)
    rec = IntervalRecord(ts=0, elapsed_s=2.0)
    c.fill(rec)
    (fig,) = rec.cgroup_io  # gone0 has no /sys entry: left out
    assert (fig.device, fig.majmin, fig.version) == ("loop3", "7:3", 1)
    assert fig.read_ios_s == 1000 and fig.read_bytes_s == 4096 * 1000
    assert (fig.read_iops, fig.read_bps, fig.write_bps, fig.write_iops) == (
        1000,
        52428800,
        None,
        None,
    )
    assert fig.throttled and fig.throttled_by == ["read_iops"]
    assert fig.counters["read_ios"] == 12000 and not rec.warnings
    grow(group, reads=100, nbytes=100 * 4096)  # well under the cap
    rec = IntervalRecord(ts=0, elapsed_s=1.0)
    c.fill(rec)
    assert rec.cgroup_io[0].read_ios_s == 100 and not rec.cgroup_io[0].throttled


def test_parent_limits_cap_the_child(tree):
    group, sysfs = tree
    parent = group.parent
    (parent / "cgroup.procs").write_text("")
    (parent / "blkio.throttle.read_iops_device").write_text("7:3 500\n")
    c = collector(group, sysfs)
    c.start()
    rec = IntervalRecord(ts=0, elapsed_s=1.0)
    c.fill(rec)
    assert rec.cgroup_io[0].read_iops == 500


def test_counters_going_down_rebaseline_never_negative(tree):
    group, sysfs = tree
    c = collector(group, sysfs)
    c.start()
    grow(group, reads=-5000, nbytes=-4096)
    rec = IntervalRecord(ts=0, elapsed_s=1.0)
    c.fill(rec)
    assert rec.cgroup_io[0].read_ios_s == 0 and "went back" in rec.warnings[0]
    grow(group, reads=10, nbytes=4096)
    rec = IntervalRecord(ts=0, elapsed_s=1.0)
    c.fill(rec)
    assert rec.cgroup_io[0].read_ios_s == 10 and not rec.warnings


def test_v2_directory_with_pressure(tmp_path, tree):
    _group, sysfs = tree
    group = tmp_path / "v2"
    shutil.copytree(FIX / "v2", group)
    (group / "io.stat").write_text("7:3 rbytes=100 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n")
    (group / "io.max").write_text("7:3 rbps=1000 wbps=max riops=max wiops=max\n")
    c = collector(group, sysfs, version=2)
    c.start()
    (group / "io.stat").write_text("7:3 rbytes=2100 wbytes=0 rios=3 wios=0 dbytes=0 dios=0\n")
    rec = IntervalRecord(ts=0, elapsed_s=2.0)
    c.fill(rec)
    fig = rec.cgroup_io[0]
    assert fig.read_bytes_s == 1000 and fig.throttled_by == ["read_bps"]
    assert (fig.pressure_some_avg10, fig.pressure_full_avg10) == (63.52, 61.07)


def test_pressure_is_read_once_per_psi_update(tmp_path, tree):
    """PSI's averages move every 2 s: a sample in between repeats them without a read."""
    _group, sysfs = tree
    group = tmp_path / "v2"
    shutil.copytree(FIX / "v2", group)
    now = [10.0]
    c = collector(group, sysfs, version=2, clock=lambda: now[0])
    c.start()

    def some_avg10() -> float | None:
        rec = IntervalRecord(ts=0, elapsed_s=1.0)
        c.fill(rec)
        return rec.cgroup_io[0].pressure_some_avg10

    assert some_avg10() == 63.52
    (group / "io.pressure").write_text(
        "some avg10=1.00 avg60=0.00 avg300=0.00 total=1\n"
        "full avg10=0.50 avg60=0.00 avg300=0.00 total=1\n"
    )
    now[0] += PRESSURE_S - 0.5
    assert some_avg10() == 63.52  # within PRESSURE_S: the figure read last
    now[0] += 0.5
    assert some_avg10() == 1.0


def test_no_cgroup_files_is_said_once(tmp_path, tree):
    _group, sysfs = tree
    c = collector(tmp_path / "nothing", sysfs)
    c.start()
    warnings = []
    for _ in range(3):
        rec = IntervalRecord(ts=0, elapsed_s=1.0)
        c.fill(rec)
        assert rec.cgroup_io == []
        warnings += rec.warnings
    assert len(warnings) == 1 and "no per-cgroup I/O accounting" in warnings[0]


def test_a_file_vanishing_is_said_once_and_sampling_resumes(tree):
    group, sysfs = tree
    c = collector(group, sysfs)
    c.start()
    saved = (group / "blkio.throttle.io_serviced").read_text()
    (group / "blkio.throttle.io_serviced").unlink()
    c._counter_files[1][0].close()  # the kept descriptor would still read the unlinked file
    warnings = []
    for _ in range(2):
        rec = IntervalRecord(ts=0, elapsed_s=1.0)
        c.fill(rec)
        warnings += rec.warnings
        assert rec.cgroup_io == []
    assert len(warnings) == 1 and "cannot read" in warnings[0]
    (group / "blkio.throttle.io_serviced").write_text(saved)
    rec = IntervalRecord(ts=0, elapsed_s=1.0)
    c.fill(rec)
    assert rec.cgroup_io and rec.cgroup_io[0].read_ios_s == 0


def test_live_own_cgroup_is_found():
    from diskinfo.collectors.cgroup import own_locations

    found = own_locations()  # empty where no cgroup filesystem is mounted (some CI containers)
    assert all(Path(loc.directory).is_dir() and loc.version in (1, 2) for loc in found)


def test_text_log_line_says_the_limit_and_throttling():
    from diskinfo.record import CgroupIO
    from diskinfo.sinks.textlog import lines

    fig = CgroupIO("loop3", "7:3", read_bytes_s=4096000, read_ios_s=1000, read_iops=1000)
    fig.throttled, fig.throttled_by = True, ["read_iops"]
    quiet = CgroupIO("sda", "8:0")  # no I/O and no limits: no line
    out = lines(IntervalRecord(ts=0, elapsed_s=1.0, cgroup_io=[fig, quiet]))
    assert out == [
        "[Cgroup] loop3: Read=3.91MB/s Write=0.00MB/s r/s=1000.0 w/s=0.0 limits rbps=- wbps=- "
        "riops=1000 wiops=- THROTTLED(read_iops)"
    ]


def test_record_round_trips_through_json():
    from diskinfo.record import CgroupIO

    rec = IntervalRecord(ts=0, elapsed_s=1.0, cgroup_io=[CgroupIO("sda", "8:0", read_iops=5)])
    assert IntervalRecord.from_dict(rec.to_dict()) == rec


# --- the verdict --------------------------------------------------------------------


def _throttled_interval(throttled: bool) -> IntervalRecord:
    """benchmarks/results/shards.md under a 1000-IOPS blkio cap: the loop waits all the time,
    the device answers in 0.12 ms and is 9% busy."""
    from diskinfo.record import CgroupIO, DeviceFigures, LoaderFigures

    dev = DeviceFigures("vda", paths=["/data"], r_s=1000, rmb_s=3.9, rareq_sz=4, r_await=0.12)
    dev.util, dev.aqu_sz = 9.0, 0.12
    fig = CgroupIO("vda", "254:0", version=1, read_ios_s=998, read_bytes_s=4e6, read_iops=1000)
    if throttled:
        fig.throttled, fig.throttled_by = True, ["read_iops"]
    else:
        fig.read_iops = None
    ld = LoaderFigures(batches=10, wait_s=4.9, step_s=0.05, wait_share=0.99, processes=1)
    ld.num_workers = 0
    return IntervalRecord(ts=0, elapsed_s=5.0, devices=[dev], loader=ld, cgroup_io=[fig])


def test_reads_at_the_cgroup_cap_say_so_and_the_first_fix_lifts_it():
    from diskinfo.analyse.verdict import decide
    from diskinfo.record import VerdictName

    v = decide(_throttled_interval(True), {})
    assert v.verdict == VerdictName.INPUT_DISK
    said = (
        "this container's reads are capped by its cgroup at 1000 IOPS (blkio throttle on vda; "
        "it reads 998 IOPS, 3.8 MB/s); the device itself is not busy (%util 9%)"
    )
    assert v.summary == said and said in v.evidence
    assert v.fixes[0].startswith("raise or remove this container's cgroup read limit (1000 IOPS")
    assert "--device-read-iops" in v.fixes[0]
    # the same figures without a cap: the old reading (many small reads), no cgroup words
    free = decide(_throttled_interval(False), {})
    assert free.verdict != VerdictName.INPUT_DISK or "cgroup" not in free.summary
    assert not any("cgroup" in x for x in free.evidence + free.fixes)


def test_counter_parsers_keep_only_the_watched_devices_when_asked():
    v1 = fix("v1", "blkio.throttle.io_service_bytes")
    full = cgroup.parse_v1_stat(v1, "bytes")
    one = next(iter(full))
    assert cgroup.parse_v1_stat(v1, "bytes", {one}) == {one: full[one]}
    v2 = fix("v2", "io.stat")
    full2 = cgroup.parse_io_stat(v2)
    one2 = next(iter(full2))
    assert cgroup.parse_io_stat(v2, {one2}) == {one2: full2[one2]}
    assert cgroup.parse_io_stat(v2, set()) == {}
