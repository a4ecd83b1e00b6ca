"""The tree's shape. The size rule: no file under src/, scripts/ or docker/ runs past 400
lines, so a module that starts to do a second job shows it before it is a third. And the
image's script folders are the repository's, so every path to them can be checked here."""

from __future__ import annotations

import re

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


# A path the image's files name under PYTORCH_CUDA_LIB, however they spell its root
NAMED = re.compile(
    r"(?:\$\{?PYTORCH_CUDA_LIB\}?\"?|%\(ENV_PYTORCH_CUDA_LIB\)s|/usr/local/lib/pytorch-cuda)"
    r"/([\w./-]*)"
)
# PYTORCH_CUDA_LIB's folders, each the repository's folder as it sits (the Dockerfile's COPYs)
IN_REPO = {name: f"docker/{name}" for name in ("start", "run", "shared")} | {"scripts": "scripts"}


def test_every_path_under_the_image_lib_is_the_repositorys() -> None:
    """The image holds docker/start, run and shared as they are here: a file moved to another
    folder without its callers fails here, not only in a built image."""
    named = [ROOT / "Dockerfile", ROOT / "entrypoint.sh", ROOT / "README.md"]
    named += sorted((ROOT / "docs").glob("*.md"))
    docker = (
        p for p in (ROOT / "docker").rglob("*") if not {"wheelhouse", "__pycache__"} & set(p.parts)
    )
    named += [p for p in docker if p.is_file()]
    missing, seen = [], 0
    for path in named:
        for match in NAMED.finditer(path.read_text(errors="replace")):
            top, _, rest = match.group(1).partition("/")
            seen += 1
            if top not in IN_REPO or not (ROOT / IN_REPO[top] / rest.rstrip(".")).exists():
                missing.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert seen > 20, "found no paths under PYTORCH_CUDA_LIB"
    assert missing == [], "named under PYTORCH_CUDA_LIB but not in the repository's folder"
