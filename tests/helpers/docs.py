"""Docs that code owns: a table between `<!-- NAME: begin -->` and `<!-- NAME: end -->` in a
docs page is the output of a renderer in the package, and a test compares the two."""

from __future__ import annotations

from tests.helpers import ROOT


def generated(page: str, name: str) -> str:
    """The text between the page's markers for `name` (docs/PAGE)."""
    text = (ROOT / "docs" / page).read_text()
    begin, end = f"<!-- {name}: begin -->\n", f"<!-- {name}: end -->"
    assert begin in text and end in text, f"docs/{page} lost its {name} markers"
    return text.split(begin, 1)[1].split(end, 1)[0]
