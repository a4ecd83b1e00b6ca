"""Issue 11's size rule, kept: no file under src/, scripts/ or docker/ runs past 400 lines, so
a module that starts to do a second job shows it before it is a third."""

from __future__ import annotations

import subprocess

from tests.helpers import ROOT

MAX_LINES = 400


def test_no_source_file_exceeds_400_lines() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "src", "scripts", "docker"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert any(name.endswith("procs.py") for name in tracked), "git ls-files found no sources"
    long = {}
    for name in tracked:
        data = (ROOT / name).read_bytes()
        if b"\0" in data:
            continue  # a binary file has no lines to count
        if (count := data.count(b"\n")) > MAX_LINES:
            long[name] = count
    assert long == {}, f"split these by what they do: {long}"
