"""Which tar files a ShardDataset source names, in the spellings webdataset users already write.

A `diskinfo pack` DEST (or its manifest.json) brings per-shard sample counts; shards from
elsewhere come as one tar, a brace pattern (`train-{000000..000146}.tar`, webdataset's and
braceexpand's notation), a glob (`train-*.tar`) or a list of paths, without counts.
"""

from __future__ import annotations

import glob
import itertools
import re
from collections.abc import Sequence
from pathlib import Path

from diskinfo.errors import UserError
from diskinfo.shards.format import MANIFEST, Manifest

# {a,b,c} or {lo..hi} or {lo..hi..step}: the innermost braces, no nesting
_BRACES = re.compile(r"\{([^{}]*)\}")
_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$")
_LETTERS = re.compile(r"^([a-zA-Z])\.\.([a-zA-Z])$")


def expand(pattern: str) -> list[str]:
    """Every name a brace pattern spells, in order, as braceexpand spells them: ranges keep
    the zero padding of their bounds, `{a,b}` lists alternatives, several braces multiply."""
    parts: list[list[str]] = []
    pos = 0
    for match in _BRACES.finditer(pattern):
        parts.append([pattern[pos : match.start()]])
        parts.append(_alternatives(match.group(1)))
        pos = match.end()
    parts.append([pattern[pos:]])
    return ["".join(p) for p in itertools.product(*parts)]


def _alternatives(body: str) -> list[str]:
    found = _RANGE.match(body)
    letters = _LETTERS.match(body)
    if letters is not None:  # {a..e}
        a, b = ord(letters.group(1)), ord(letters.group(2))
        return [chr(c) for c in (range(a, b + 1) if a <= b else range(a, b - 1, -1))]
    if found is None:
        return body.split(",") if "," in body else ["{" + body + "}"]
    lo, hi, step = found.group(1), found.group(2), found.group(3)
    width = max(len(lo), len(hi)) if _padded(lo) or _padded(hi) else 0
    by = abs(int(step or 1)) or 1  # braceexpand takes a step of 0 as 1
    a, b = int(lo), int(hi)
    numbers = range(a, b + 1, by) if a <= b else range(a, b - 1, -by)
    return [str(n).zfill(width) for n in numbers]


def _padded(bound: str) -> bool:
    digits = bound.lstrip("-")
    return len(digits) > 1 and digits[0] == "0"


def resolve(source: str | Path | Sequence[str | Path]) -> tuple[list[str], Manifest | None]:
    """(tar paths, the pack's manifest or None). A one-line UserError when the source names
    no tar, or a named tar is missing: found here, not by a DataLoader worker mid-epoch."""
    if not isinstance(source, (str, Path)):
        return _existing([str(p) for p in source], "the list"), None
    text = str(source)
    path = Path(text)
    if path.is_dir() or path.name == MANIFEST:
        if path.is_dir() and not (path / MANIFEST).exists():
            raise UserError(
                f"no {MANIFEST} in {path}: not a finished `diskinfo pack` output; for tar "
                f"shards made elsewhere give their paths, or a pattern such as "
                f"{path}/shard-{{000000..000063}}.tar or {path}/*.tar"
            )
        manifest = Manifest.read(path)
        base = path if path.is_dir() else path.parent
        return [str(base / s.name) for s in manifest.shards], manifest
    if _BRACES.search(text):
        return _existing(expand(text), text), None
    if glob.has_magic(text):
        found = sorted(glob.glob(text))
        if not found:
            raise UserError(f"no file matches {text}")
        return found, None
    return _existing([text], text), None


def manifest_beside(paths: Sequence[str]) -> Manifest | None:
    """The manifest of the pack whose shards `paths` are, when they were named one by one or
    by a pattern (`DEST/*.tar`) rather than by DEST: all in one folder, every one listed in
    the manifest there. A pack made with `--labels key` keeps the classes there; without
    them its samples would come without `cls`. None otherwise."""
    folders = {Path(p).parent for p in paths}
    if len(folders) != 1 or not (folder := folders.pop()).joinpath(MANIFEST).is_file():
        return None
    try:
        manifest = Manifest.read(folder)
    except UserError:
        return None
    names = {s.name for s in manifest.shards}
    return manifest if all(Path(p).name in names for p in paths) else None


def _existing(paths: list[str], named_by: str) -> list[str]:
    if not paths:
        raise UserError(f"no shards in {named_by}")
    for p in paths:
        if not Path(p).is_file():
            origin = f" (from {named_by})" if p != named_by else ""
            raise UserError(f"no such shard: {p}{origin}")
    return paths
