"""The docs lead to the code: every file a doc, ARCHITECTURE.md or a module's text names exists,
and every `diskinfo.x.y` module it names is one. A move that leaves a name behind fails here.

A file is named by a path ending in a known extension (`rotating_file.py`, `docs/gpu.md`):
it must be the end of a file in the repository (so `shards/format.py` finds
src/diskinfo/shards/format.py). A module is named `diskinfo.a.b[.attr]`: some leading part
of it must be a module or package under src/, and the next part, if any, a name in it.
"""

from __future__ import annotations

import ast
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.helpers import ROOT

EXTENSIONS = "py|sh|md|yml|yaml|json|toml|conf|tmpl|c|txt"
PATH = re.compile(rf"(?<![\w/.$<{{-])((?:[\w.-]+/)*[\w-]+\.(?:{EXTENSIONS}))(?![\w/])")
# a schema (`diskinfo.interval/1`) or a label (`diskinfo.io/...`) is no module
MODULE = re.compile(r"(?<![\w./])(diskinfo(?:\.[A-Za-z_]\w*)+)(?![\w/(])")
# files that are not this repository's: the user's, a container's, a peer's, the stdlib's
NOT_OURS = re.compile(
    r"^(train|startup|supervisord|jupyter|sshd|manifest|loaders|overhead|results?)\.|"
    r"^[\w-]+\.(json|jsonl|txt|conf|log)$|^(DEST|logs|path|code)/|^src/train\.py$|^\./render|"
    r"^(cmd|getpass|secrets|json|p4train)\.py$|^(common|iostat|rd_stats)\.c$|^tools/nfs-iostat/"
)
# the log folder's files (logfiles), named like modules
FILES = {f"diskinfo.{ext}" for ext in ("jsonl", "log", "lock", "sif")}  # and the HPC image
# and monitoring/alertmanager/wecom.tmpl's templates, named like modules
FILES |= {f"diskinfo.{name}" for name in ("id", "text", "fix")}


@cache
def tracked() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split()


def exists(name: str, page: Path = ROOT) -> bool:
    """`name` relative to the page's folder when it starts with `../`, else a tracked file's
    end."""
    if name.startswith("../"):
        return (page.parent / name).resolve().is_file()
    return any(f == name or f.endswith("/" + name) for f in tracked())


def module_exists(dotted: str) -> bool:
    parts = dotted.split(".")
    base = ROOT / "src"
    for i in range(len(parts), 0, -1):
        path = base.joinpath(*parts[:i])
        module = path.with_suffix(".py") if not path.is_dir() else path / "__init__.py"
        if module.is_file():
            rest = parts[i:]
            if not rest:
                return True
            names = _names(module)
            return rest[0] in names or (path.is_dir() and (path / rest[0]).exists())
    return False


@cache
def _names(module: Path) -> frozenset[str]:
    tree = ast.parse(module.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            found |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return frozenset(found)


def texts() -> list[Path]:
    docs = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]
    return docs + sorted((ROOT / "src" / "diskinfo").rglob("*.py"))


def named(text: str) -> tuple[set[str], set[str]]:
    paths = {m for m in PATH.findall(text) if not NOT_OURS.search(m)}
    return paths, set(MODULE.findall(text)) - FILES


@pytest.mark.parametrize("page", texts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_and_module_named_exists(page: Path) -> None:
    paths, modules = named(page.read_text())
    missing = sorted(p for p in paths if not exists(p, page))
    missing += sorted(m for m in modules if not module_exists(m.rstrip(".")))
    assert not missing, f"{page.relative_to(ROOT)} names what is not there: {missing}"


def test_a_moved_file_is_found() -> None:
    assert named("see rotating_file.py and diskinfo.shards.format.Manifest")[0] == {
        "rotating_file.py"
    }
    assert not exists("sinks/logdir_lock.py") and exists("shards/format.py")
    assert module_exists("diskinfo.shards.format.Manifest")
    assert not module_exists("diskinfo.shard_mixing")
