"""/proc/diskstats parsing: every kernel layout, garbage, and hypothesis fuzzing."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo.sources import ParseError, diskstats
from diskinfo.sources.diskstats import ALL_FIELDS, DiskCounters, parse, parse_line
from tests.helpers.fixtures import text

KERNEL_6 = " 254       0 vda 31021 8347 2323634 6078 49437 48379 5595456 19140 0 7732 26818 12690 47 589456 1041 10521 556"  # noqa: E501
KERNEL_4_18 = "   8       0 sda 120 3 9000 40 50 6 700 80 1 90 100 4 0 64 2"
KERNEL_4_4 = "   8       1 sda1 120 3 9000 40 50 6 700 80 0 90 100"


def test_kernel_6_line_has_discard_and_flush():
    c = parse_line(KERNEL_6)
    assert (c.major, c.minor, c.name, c.devno) == (254, 0, "vda", "254:0")
    assert (c.rd_ios, c.rd_sectors, c.wr_ticks, c.io_ticks, c.rq_ticks) == (
        31021,
        2323634,
        19140,
        7732,
        26818,
    )
    assert (c.dc_ios, c.dc_sectors, c.fl_ios, c.fl_ticks) == (12690, 589456, 10521, 556)
    assert c.has_discard and c.has_flush and c.reported == 17


def test_older_layouts_leave_discard_and_flush_unset():
    c = parse_line(KERNEL_4_18)
    assert c.has_discard and not c.has_flush and c.in_flight == 1 and c.reported == 15
    old = parse_line(KERNEL_4_4)
    assert not old.has_discard and old.dc_ios is None and old.fl_ios is None
    assert old.reported == 11


@pytest.mark.parametrize(
    "line",
    [
        "",
        "8 0 sda 1 2 3",  # 2.6 partition layout (7 fields) is not accepted: too old
        "8 0 sda 1 2 3 4 5 6 7 8 9 10 x",
        "8 0 sda 1 2 3 4 5 6 7 8 9 10 -11",
        "a b sda 1 2 3 4 5 6 7 8 9 10 11",
        "8 0 sda 1 2 3 4 5 6 7 8 9 10",  # 13 fields: one counter short of the oldest layout
    ],
)
def test_malformed_lines_raise_parse_error(line):
    with pytest.raises(ParseError):
        parse_line(line)


def test_a_bad_line_costs_only_that_device():
    devices, errors = parse(KERNEL_6 + "\n garbage here\n" + KERNEL_4_18 + "\n")
    assert sorted(devices) == ["sda", "vda"] and len(errors) == 1
    assert "garbage" in errors[0]


def test_captured_files_parse_cleanly():
    for name in ("host-loops", "container-overlay", "nvme-partitions", "lvm-md-crypt"):
        devices, errors = parse(text(name, "proc/diskstats"))
        assert devices and not errors, name


def test_named_devices_are_the_same_counters_as_a_full_parse():
    """The monitor's str.find path reads exactly the lines a full parse gives for the names,
    never a longer name that contains them (sda in sda1, loop1 in loop10)."""
    for name in ("host-loops", "container-overlay", "nvme-partitions", "lvm-md-crypt"):
        every, _ = parse(text(name, "proc/diskstats"))
        names = sorted(every)
        for wanted in ([names[0]], names[::3], names[-2:], [*names[:2], "missing0"]):
            some, errors = parse(text(name, "proc/diskstats"), wanted)
            assert some == {k: every[k] for k in wanted if k in every} and not errors, name


def test_a_name_that_is_another_field_falls_back_to_the_full_parse():
    line = "   8       0 sda 8 0 8 0 0 0 0 0 0 0 0"  # "0" is also a counter
    zero = line.replace(" sda ", " 0 ")
    assert parse(line + "\n" + zero, ["0"])[0] == {"0": parse_line(zero)}


def test_every_line_of_14_or_more_fields_is_read_as_iostat_reads_it():
    """A kernel that appends counters must not blind the monitor (kernels add fields at the end)."""
    devices, errors = parse(text("kernel-variants", "diskstats"))
    assert not errors
    assert sorted(devices) == ["loop0", "nvme0n1", "nvme0n1p1", "sda", "sdb", "vda"]
    assert not devices["sda"].has_discard and not devices["sda"].has_flush
    assert devices["sdb"].has_discard and not devices["sdb"].has_flush
    assert (devices["nvme0n1"].fl_ios, devices["nvme0n1"].fl_ticks) == (134, 11)
    # extra trailing counters are ignored; the known ones keep their places
    assert (devices["nvme0n1p1"].fl_ios, devices["nvme0n1p1"].fl_ticks) == (0, 0)
    vda = devices["vda"]
    assert (vda.rd_ios, vda.rq_ticks, vda.dc_ios, vda.fl_ticks) == (31021, 26818, 12690, 556)
    # part of a group is no group: 16 fields read as the 14-field layout
    assert devices["loop0"].rq_ticks == 7797 and not devices["loop0"].has_discard


def test_live_file_parses():
    devices, errors = parse(diskstats.read())
    assert devices and not errors


counts = st.integers(min_value=0, max_value=2**64 - 1)
times = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def counters(draw):
    n = draw(st.sampled_from([11, 15, 17]))
    values = [draw(times if name.endswith("_ticks") else counts) for name in ALL_FIELDS[:n]] + [
        None
    ] * (17 - n)
    name = draw(st.from_regex(r"[a-z][a-z0-9_-]{0,15}", fullmatch=True))
    return DiskCounters(draw(st.integers(0, 4095)), draw(st.integers(0, 2**20)), name, *values)


@given(counters())
def test_round_trip(c):
    assert parse_line(c.to_line()) == c


@given(st.text())
def test_garbage_never_raises_anything_but_parse_error(s):
    with contextlib.suppress(ParseError):
        parse_line(s)
    devices, errors = parse(s)  # the whole-file parser never raises
    assert isinstance(devices, dict) and isinstance(errors, list)


@given(st.lists(st.one_of(st.integers(-5, 2**70), st.text(max_size=5)), max_size=22))
def test_near_miss_lines(fields):
    line = " ".join(str(f) for f in fields)
    try:
        c = parse_line(line)
    except ParseError:
        return
    assert all(getattr(c, f) is None or getattr(c, f) >= 0 for f in ALL_FIELDS)
