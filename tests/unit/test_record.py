"""The record's vocabulary: verdict and cause names are enumeration members whose values are
the JSONL strings users read, on the image's Python 3.10 as on 3.11 (no enum.StrEnum)."""

from __future__ import annotations

import json
import re

import orjson

from diskinfo.record import VERDICTS, Cause, IntervalRecord, Verdict, VerdictName
from tests.helpers import ROOT


def test_members_read_as_their_strings_everywhere_a_user_sees_them():
    v = Verdict(verdict=VerdictName.INPUT_DISK, cause=Cause.CGROUP_CAP)
    line = orjson.dumps(IntervalRecord(ts=0.0, elapsed_s=1.0, verdict=v))
    back = json.loads(line)["verdict"]
    assert (back["verdict"], back["cause"]) == ("input-bound: disk", "cgroup-cap")
    assert f"{v.verdict}: {v.cause}" == "input-bound: disk: cgroup-cap"  # the log's format
    assert str(Cause.STEP) == f"{Cause.STEP}" == "step"
    # a name read back from JSONL is a plain str and still meets its member
    assert back["verdict"] == VerdictName.INPUT_DISK
    assert {VerdictName.INPUT_DISK: 1}[back["verdict"]] == 1


def test_every_cause_names_one_verdict_and_the_input_bound_family_is_the_enums():
    assert {c.verdict for c in Cause} == set(VerdictName)
    bound = {v for v in VerdictName if v.input_bound}
    assert bound == {VerdictName.INPUT_DISK, VerdictName.INPUT_CPU, VerdictName.INPUT_SMALL_FILES}
    assert VerdictName.is_input_bound("input-bound: cpu")  # a plain str from JSONL
    assert not VerdictName.is_input_bound("no verdict")
    assert tuple(VerdictName) == VERDICTS  # the public tuple keeps its order


def _documented(key: str) -> list[str]:
    """The names docs/jsonl-schema.md's `verdict` section lists for `key`."""
    section = (ROOT / "docs/jsonl-schema.md").read_text().split("## `verdict`", 1)[1]
    row = next(line for line in section.splitlines() if line.startswith(f"| `{key}` |"))
    # the cell's names, before the parenthesis that says where they come from
    return re.findall(r"`([^`]+)`", row.split("|")[2].split(" (the values")[0])


def test_jsonl_schema_lists_every_verdict_and_cause():
    assert _documented("verdict") == [v.value for v in VerdictName]
    assert sorted(_documented("cause")) == sorted(c.value for c in Cause)
