"""Load the image's Python scripts (docker/start/*.py, docker/run/*.py) as modules, without
touching sys.path.

In the image they sit side by side in /usr/local/lib/pytorch-cuda and import each other by
bare name (`import ssh_keys`), so each is registered in sys.modules under that name.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from tests.helpers import ROOT

DOCKER = ROOT / "docker"
PHASES = ("start", "run")


def path_of(filename: str) -> Path:
    """Where docker/<phase>/filename is in the checkout (the image puts them side by side)."""
    found = [DOCKER / phase / filename for phase in PHASES if (DOCKER / phase / filename).exists()]
    assert found, f"no docker/{{start,run}}/{filename}"
    return found[0]


def load(name: str, filename: str | None = None) -> ModuleType:
    """docker/<phase>/<filename or name>.py as module `name` (imported once)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path_of(filename or f"{name}.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
