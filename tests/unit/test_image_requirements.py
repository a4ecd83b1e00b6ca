"""The image installs diskinfo's dependencies from docker/build/requirements.txt, written by hand
beside pyproject.toml: these tests fail when the two drift, or when the Dockerfile pins a
package anywhere else."""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

import tomllib
from packaging.requirements import Requirement

from tests.helpers import ROOT

REQUIREMENTS = ROOT / "docker" / "build" / "requirements.txt"
# the extras the image carries: `diskinfo report`'s PNG and the shard examples
IMAGE_EXTRAS = ("report", "shards")
MARKER = "# diskinfo's dependencies"


def _norm(requirement: str) -> str:
    return re.sub(r"\s+", "", requirement).lower().replace("_", "-")


def _requirements() -> tuple[list[str], list[str]]:
    """(the image's own packages, the diskinfo part) of requirements.txt."""
    own: list[str] = []
    diskinfo: list[str] = []
    target = own
    for line in REQUIREMENTS.read_text().splitlines():
        if line.startswith(MARKER):
            target = diskinfo
        line = line.split("#", 1)[0].strip()
        if line:
            target.append(_norm(line))
    return own, diskinfo


def test_the_diskinfo_part_equals_pyprojects_dependencies_and_image_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in IMAGE_EXTRAS:
        wanted += project["optional-dependencies"][extra]
    _, diskinfo = _requirements()
    assert sorted(diskinfo) == sorted(_norm(r) for r in wanted)


def test_no_package_is_listed_twice():
    own, diskinfo = _requirements()
    names = [re.split(r"[<>=!~;\[]", r)[0] for r in own + diskinfo]
    assert len(names) == len(set(names)), names


def test_the_dockerfile_installs_python_packages_only_from_that_file_and_torch():
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    installs = [line for line in dockerfile.splitlines() if "pip-install" in line]
    installs = [line for line in installs if not line.lstrip().startswith("#")]
    assert installs, "the Dockerfile no longer uses docker/build/pip-install"
    for line in installs:
        command = line.rsplit("pip-install", 1)[1]  # after the bind mount that provides it
        assert "-r /tmp/requirements.txt" in command or '"${pkgs[@]}"' in command, command
    # diskinfo itself is installed without dependencies: they all came from the file
    assert "pip install" not in dockerfile.replace("pip install --no-deps", "")


def test_torch_version_is_declared_once():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert len(re.findall(r"^ARG TORCH_VERSION=", dockerfile, re.M)) == 1


def test_the_image_builds_diskinfo_with_the_setuptools_pyproject_needs():
    """The image builds diskinfo with --no-build-isolation, so its own setuptools must meet
    build-system.requires; pyproject's SPDX `license` string needs setuptools 77 (the old
    `license = {text = ...}` table printed a deprecation with a 2027-02-18 deadline on every
    `make dev`)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["build-system"]["requires"] == ["setuptools>=77"]
    assert isinstance(pyproject["project"]["license"], str)
    own, _ = _requirements()
    assert "setuptools>=77" in own, own


def _script() -> ModuleType:
    """scripts/image-constraints.py, which writes and checks the constraints: its reader and
    its names are the ones these tests hold the file to."""
    spec = importlib.util.spec_from_file_location(
        "image_constraints", ROOT / "scripts" / "image-constraints.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CONSTRAINTS_SCRIPT = _script()
CONSTRAINTS = CONSTRAINTS_SCRIPT.CONSTRAINTS


def _constraints() -> dict[str, str]:
    return CONSTRAINTS_SCRIPT.read(CONSTRAINTS)


def test_constraints_pin_every_requirement_at_a_version_it_accepts():
    """The build installs requirements.txt under docker/build/constraints.txt: a package added
    to one and not the other, or a range the pinned version falls out of, fails here (offline;
    `make constraints-check` resolves the whole set with pip)."""
    pins = _constraints()
    own, diskinfo = _requirements()
    for requirement in own + diskinfo:
        parsed = Requirement(requirement)
        name = CONSTRAINTS_SCRIPT.normalise(parsed.name)
        assert name in pins, f"{name} is not in {CONSTRAINTS.name}: run `make constraints`"
        assert parsed.specifier.contains(pins[name], prereleases=True), (requirement, pins[name])


def test_constraints_leave_the_torch_stack_to_the_dockerfile_and_torch():
    """torch's version is the Dockerfile's ARG, its CUDA libraries are torch's own exact pins
    (cu118, cu126 and cu128 builds differ), so a pin here would fight the CUDA variants."""
    stack = [n for n in _constraints() if CONSTRAINTS_SCRIPT.TORCH_STACK.fullmatch(n)]
    assert stack == []


def test_the_tools_layer_installs_under_the_constraints():
    dockerfile = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    (tools,) = [line for line in dockerfile.splitlines() if "-r /tmp/requirements.txt" in line]
    assert "source=docker/build/constraints.txt,target=/tmp/constraints.txt" in tools
    assert "PIP_CONSTRAINT=/tmp/constraints.txt pip-install" in tools
