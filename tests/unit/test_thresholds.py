"""diskinfo/thresholds.py: every threshold the analysis compares with is a named constant there,
and docs/verdicts.md's thresholds table is rendered from them (it cannot drift by hand)."""

from __future__ import annotations

import pytest

from diskinfo import thresholds as t
from tests.helpers.docs import generated


def test_every_threshold_is_in_the_table():
    constants = {
        name
        for name, value in vars(t).items()
        if name.isupper() and isinstance(value, int | float) and not isinstance(value, bool)
    }
    documented = [name for _group, rows in t.documented() for name, _doc in rows]
    assert len(documented) == len(set(documented))
    assert constants == set(documented)


def test_every_group_is_a_heading_and_has_rows():
    groups = t.documented()
    assert [g for g, _ in groups][:2] == ["input share (XProf)", "GPU"]
    assert len({g for g, _ in groups}) == len(groups) and all(rows for _, rows in groups)


def test_docs_thresholds_table_is_the_codes():
    assert generated("verdicts.md", "thresholds table") == t.markdown_table(), (
        "docs/verdicts.md is out of date: replace its thresholds table with the output of "
        "`python -m diskinfo.thresholds`"
    )


@pytest.mark.parametrize(
    ("value", "threshold", "text"), [(19.76, 20, "19.8"), (20.0, 20, "20"), (89.99, 90, "89.99")]
)
def test_shown_never_rounds_across_the_threshold(value, threshold, text):
    assert t.shown(value, threshold) == text
