"""analyse/fixes.py: every cause says which fixes it gets, and docs/verdicts.md's cause table
is rendered from that table (it cannot drift by hand)."""

from __future__ import annotations

from diskinfo.analyse import fixes
from diskinfo.record import Cause
from tests.helpers.docs import generated


def test_every_cause_has_its_fixes():
    assert set(fixes.FIXES) == set(Cause)


def test_docs_cause_table_is_the_codes():
    assert generated("verdicts.md", "cause table") == fixes.markdown_table(), (
        "docs/verdicts.md is out of date: replace its cause table with the output of "
        "`python -m diskinfo.analyse.fixes`"
    )
