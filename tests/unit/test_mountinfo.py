"""/proc/self/mountinfo parsing: escapes, optional fields, garbage, hypothesis fuzzing."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diskinfo.sources import ParseError, mountinfo
from diskinfo.sources.mountinfo import Mount, escape, parse, parse_line, unescape
from tests.helpers.fixtures import text


def test_container_overlay_line_and_its_options():
    mounts, errors = parse(text("container-overlay", "proc/self/mountinfo"))
    assert not errors
    root = mounts[0]
    assert (root.mountpoint, root.fstype, root.devno, root.optional) == (
        "/",
        "overlay",
        "0:42",
        ("master:2",),
    )
    assert root.super_option("upperdir").startswith("/var/lib/docker/overlay2/")
    assert root.super_option("nosuch") is None
    hosts = next(m for m in mounts if m.mountpoint == "/etc/hosts")
    assert hosts.root.startswith("/var/lib/docker/containers/") and hosts.devno == "254:0"


def test_escaped_space_and_no_optional_fields():
    m = parse_line("30 25 0:50 / /mnt/my\\040data rw,nosuid - tmpfs tmpfs rw,size=1024k")
    assert m.mountpoint == "/mnt/my data" and m.optional == ()
    assert parse_line(m.to_line()) == m


def test_several_optional_fields():
    m = parse_line("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:7 - ext3 /dev/root rw")
    assert m.optional == ("master:1", "shared:7") and m.root == "/mnt1"


@pytest.mark.parametrize(
    "line",
    [
        "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 ext3 /dev/root rw",  # no separator
        "36 35 98-0 /mnt1 /mnt2 rw - ext3 /dev/root rw",
        "x 35 98:0 /mnt1 /mnt2 rw - ext3 /dev/root rw",
        "36 35 98:0 /mnt1 mnt2 rw - ext3 /dev/root rw",
        "36 35 98:0 /mnt1 /mnt2 rw - ext3 /dev/root",
    ],
)
def test_malformed_lines(line):
    with pytest.raises(ParseError):
        parse_line(line)


def test_live_file_parses():
    mounts, errors = parse(mountinfo.read())
    assert mounts and not errors and any(m.mountpoint == "/" for m in mounts)


def test_escape_round_trip():
    s = "a b\tc\nd\\e"
    assert unescape(escape(s)) == s and " " not in escape(s)


path_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=20,
)
word = st.from_regex(r"[a-z0-9_.=,:]{1,12}", fullmatch=True)


@st.composite
def mounts(draw):
    return Mount(
        mount_id=draw(st.integers(0, 10**6)),
        parent_id=draw(st.integers(0, 10**6)),
        major=draw(st.integers(0, 4095)),
        minor=draw(st.integers(0, 2**20)),
        root="/" + draw(path_text),
        mountpoint="/" + draw(path_text),
        options=draw(word),
        optional=tuple(
            draw(st.lists(st.from_regex(r"(shared|master):[0-9]{1,3}", fullmatch=True), max_size=3))
        ),
        fstype=draw(word.filter(lambda w: w != "-")),
        source=draw(path_text.filter(bool)),
        super_options=draw(word),
    )


@given(mounts())
def test_round_trip(m):
    assert parse_line(m.to_line()) == m


@given(st.text())
def test_garbage_never_raises_anything_but_parse_error(s):
    with contextlib.suppress(ParseError):
        parse_line(s)
    found, errors = parse(s)
    assert isinstance(found, list) and isinstance(errors, list)
