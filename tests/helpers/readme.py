"""README.md's quickstart block as commands: the tests run what the README says, as written."""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.helpers import ROOT


def quickstart() -> list[str]:
    """The commands of README.md's quickstart block, continuation lines joined, comments out."""
    text = (ROOT / "README.md").read_text()
    assert "<!-- quickstart" in text, "README.md lost its quickstart marker"
    block = text.split("<!-- quickstart", 1)[1].split("```sh\n", 1)[1].split("\n```", 1)[0]
    commands, current = [], ""
    for line in block.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current += line.rstrip()
        if current.endswith("\\"):
            current = current[:-1].rstrip() + " "
            continue
        commands.append(re.sub(r"\s+", " ", current.strip()))
        current = ""
    return commands


def readme_command(predicate: Callable[[str], bool]) -> str:
    """The one quickstart command that predicate picks (two would make the tests ambiguous)."""
    found = [c for c in quickstart() if predicate(c)]
    assert len(found) == 1, f"expected one such command in the quickstart, found {found}"
    return found[0]
