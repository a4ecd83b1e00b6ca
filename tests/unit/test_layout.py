"""The size rule: no file under src/, scripts/ or docker/ runs past 400 lines, so
a module that starts to do a second job shows it before it is a third."""

from __future__ import annotations

from tests.helpers import ROOT

MAX_LINES = 400


def test_no_source_file_exceeds_400_lines() -> None:
    files = [
        path
        for top in ("src", "scripts", "docker")
        for path in (ROOT / top).rglob("*")
        if path.is_file() and not {"__pycache__", "wheelhouse"} & set(path.parts)
        and not any(part.endswith(".egg-info") for part in path.parts)
    ]  # fmt: skip
    assert any(path.name == "procs.py" for path in files), "found no sources"
    long = {}
    for path in files:
        data = path.read_bytes()
        if b"\0" in data:
            continue  # a binary file has no lines to count
        if (count := data.count(b"\n")) > MAX_LINES:
            long[str(path.relative_to(ROOT))] = count
    assert long == {}, f"split these by what they do: {long}"
