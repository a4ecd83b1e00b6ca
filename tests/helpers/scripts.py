"""Load the image's Python scripts (docker/start/, docker/run/, docker/shared/) as modules,
without touching sys.path.

The image holds these folders as they are here (PYTORCH_CUDA_LIB/start, run and shared), and
a script imports a module by bare name (`import ssh_keys` beside it in start/, `import
safe_paths` from shared/), from the folder it puts on sys.path when it runs. Here each script
is registered in sys.modules under that bare name, and the neighbours it imports by bare
name (its own folder's, then shared/'s) are loaded before it, so no test has to know them.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.helpers import ROOT

DOCKER = ROOT / "docker"


def load(path: str) -> ModuleType:
    """docker/<path> ("start/settings.py") as the module its file names ("settings"; a dash in
    the name is an underscore: "run/supervisord-run.py" is supervisord_run), imported once."""
    file = DOCKER / path
    assert file.is_file(), f"no docker/{path}"
    name = Path(path).stem.replace("-", "_")
    if name in sys.modules:
        loaded = sys.modules[name]
        assert getattr(loaded, "__file__", None) == str(file), f"{name} is {loaded!r}, not {file}"
        return loaded
    for neighbour in _neighbours(file):
        load(str(neighbour.relative_to(DOCKER)))
    spec = importlib.util.spec_from_file_location(name, file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _neighbours(file: Path) -> list[Path]:
    """The scripts `file` imports by bare name, found where the image's sys.path finds them."""
    names = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    found = []
    for name in sorted(names):
        for folder in (file.parent, DOCKER / "shared"):
            candidate = folder / f"{name}.py"
            if candidate.is_file() and candidate != file:
                found.append(candidate)
                break
    return found
