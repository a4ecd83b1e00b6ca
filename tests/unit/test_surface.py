"""What users rely on, pinned: every verb's options, the JSONL field set, the public imports,
the console command and the environment variables the image reads.

The expected surface lives in tests/unit/surface.json. Something missing from the code is a
break for users and fails here. Something new fails too, until it is recorded on purpose:

    .venv/bin/python -m tests.unit.test_surface      # rewrites surface.json from the code

(the environment list is kept by hand: add a new variable to surface.json yourself).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import re
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
import tomllib

from diskinfo import record
from diskinfo.cli import build_parser
from scripts.validate_cuda.cli import build_parser as validate_cuda_parser
from tests.helpers import ROOT

PINNED = Path(__file__).with_name("surface.json")
PUBLIC_IMPORTS = (
    "diskinfo.__version__",
    "diskinfo.cli.main",
    "diskinfo.torch.watch",
    "diskinfo.torch.WatchedLoader",
    "diskinfo.shards.ShardDataset",
    "diskinfo.pack.pack",
    "diskinfo.pack.read_manifest",
    "diskinfo.record.IntervalRecord",
    "diskinfo.record.SCHEMA",
    "diskinfo.record.VERDICTS",
)
IMAGE_FILES = ("Dockerfile", "entrypoint.sh", "docker", "src", "scripts/validate_cuda")


def options(parser: argparse.ArgumentParser) -> dict[str, list[str]]:
    """Each verb's option strings (positionals by name), with the choices an option takes."""
    out: dict[str, list[str]] = {}

    def walk(prefix: str, p: argparse.ArgumentParser) -> None:
        names: list[str] = []
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for verb, sub in action.choices.items():
                    walk(f"{prefix} {verb}", sub)
                continue
            for name in action.option_strings or [action.dest]:
                names.append(name)
                names += [f"{name}={c}" for c in action.choices or ()]
        out[prefix] = sorted(names)

    walk(parser.prog, parser)
    return out


def record_fields() -> dict[str, list[str]]:
    """Field names of the JSONL record and of every record type inside it."""
    out: dict[str, list[str]] = {}
    todo: list[type] = [record.IntervalRecord]
    while todo:
        kind = todo.pop()
        if kind.__name__ in out:
            continue
        out[kind.__name__] = sorted(f.name for f in dataclasses.fields(kind))
        for hint in typing.get_type_hints(kind, vars(record)).values():
            for arg in [hint, *typing.get_args(hint), *map(typing.get_args, typing.get_args(hint))]:
                for t in arg if isinstance(arg, tuple) else (arg,):
                    if dataclasses.is_dataclass(t):
                        todo.append(t)  # type: ignore[arg-type]
    return dict(sorted(out.items()))


def importable(dotted: str) -> bool:
    module, _, name = dotted.rpartition(".")
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


def current() -> dict[str, Any]:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    return {
        "cli": options(build_parser()),
        "validate-cuda": options(validate_cuda_parser())["validate-cuda"],
        "console_scripts": scripts,
        "jsonl_schema": record.SCHEMA,
        "jsonl_fields": record_fields(),
        "imports": sorted(name for name in PUBLIC_IMPORTS if importable(name)),
    }


def pinned() -> dict[str, Any]:
    return json.loads(PINNED.read_text())


def diff(old: Any, new: Any, path: str = "") -> tuple[list[str], list[str]]:
    """(missing, added) leaves between two surfaces, as readable paths."""
    if isinstance(old, dict) and isinstance(new, dict):
        missing, added = [], []
        for key in old.keys() | new.keys():
            where = f"{path}/{key}"
            if key not in new:
                missing.append(where)
            elif key not in old:
                added.append(where)
            else:
                m, a = diff(old[key], new[key], where)
                missing += m
                added += a
        return sorted(missing), sorted(added)
    if isinstance(old, list) and isinstance(new, list):
        return (
            [f"{path}: {x}" for x in old if x not in new],
            [f"{path}: {x}" for x in new if x not in old],
        )
    return ([f"{path}: {old!r} is now {new!r}"], []) if old != new else ([], [])


@pytest.mark.parametrize("part", ["cli", "validate-cuda", "console_scripts", "jsonl", "imports"])
def test_nothing_users_rely_on_went_away_and_additions_are_recorded(part: str) -> None:
    keys = ("jsonl_schema", "jsonl_fields") if part == "jsonl" else (part,)
    old, new = pinned(), current()
    missing, added = diff({k: old[k] for k in keys}, {k: new[k] for k in keys})
    assert not missing, f"removed or renamed, which breaks users: {missing}"
    assert not added, (
        f"new surface not recorded yet: {added}; if intended, run "
        "`.venv/bin/python -m tests.unit.test_surface` and commit tests/unit/surface.json"
    )


def test_every_pinned_environment_variable_is_still_read_by_the_image() -> None:
    text = ""
    for name in IMAGE_FILES:
        path = ROOT / name
        files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
        for f in files:
            if f.suffix in ("", ".py", ".sh", ".conf") or f.name == "Dockerfile":
                text += f.read_text(errors="replace")
    unread = [v for v in pinned()["environment"] if not re.search(rf"\b{v}\b", text)]
    assert not unread, f"no longer read by the image (a user setting would be ignored): {unread}"


def record_surface() -> None:
    """Rewrite surface.json from the code, keeping the hand-kept environment list."""
    keep = pinned().get("environment", []) if PINNED.exists() else []
    data = {**current(), "environment": sorted(keep)}
    PINNED.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"recorded {PINNED.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    record_surface()
