#!/usr/bin/env python3
"""docker/build/constraints.txt: the exact versions the image's tools layer installs, as pip
resolves docker/build/requirements.txt with the Dockerfile's torch line for the real base's
CPython 3.10 (manylinux wheels only, as the build takes them).

  image-constraints.py write    resolve for 3.10 and (re)write the file
  image-constraints.py check    resolve again with the file as constraints, for 3.10 and for
                                the stand-in's 3.11: fails when a pinned version has no wheel
                                for either, or requirements.txt and the file disagree

Pinning makes the real build and CI install the same packages, whatever PyPI released since;
resolving for 3.10 makes a dependency that dropped 3.10 fail here instead of in the real build.
torch, torchvision, torchaudio, triton and torch's nvidia-*-cuNN libraries are left out: the
Dockerfile's ARGs pin the first three, and each torch build (cu118, cu126, cu128) pins its own
CUDA libraries exactly.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "docker" / "build" / "requirements.txt"
CONSTRAINTS = ROOT / "docker" / "build" / "constraints.txt"
DOCKERFILE = ROOT / "Dockerfile"
PYTHONS = ("3.10", "3.11")  # the real base's, the stand-in's
# Ubuntu 22.04's glibc is 2.35; pip takes the platform tags as given, so every older one too
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]
TORCH_STACK = re.compile(r"torch|torchvision|torchaudio|triton|nvidia-.*-cu\d+")
HEADER = """\
# Exact versions of what docker/build/requirements.txt installs in the image, as pip resolves it
# with torch {torch} for the real base's CPython 3.10 (manylinux wheels). Written by
# `make constraints`; `make lint` fails when it no longer matches requirements.txt or a version
# has no wheel for CPython 3.10 or 3.11. torch, torchvision, torchaudio and torch's CUDA
# libraries are not here: the Dockerfile's ARGs and each torch build pin them.
"""


def normalise(name: str) -> str:
    """PEP 503's form, the one pip's report and this file use."""
    return re.sub(r"[-_.]+", "-", name).lower()


def torch_line() -> list[str]:
    """torch, torchvision and torchaudio as the Dockerfile's ARG defaults pin them."""
    text = DOCKERFILE.read_text()
    pins = []
    for package, arg in (
        ("torch", "TORCH_VERSION"),
        ("torchvision", "TORCHVISION_VERSION"),
        ("torchaudio", "TORCHAUDIO_VERSION"),
    ):
        found = re.search(rf"^ARG {arg}=(\S+)$", text, re.M)
        if not found:
            sys.exit(f"image-constraints: no `ARG {arg}=...` in the Dockerfile")
        pins.append(f"{package}=={found.group(1)}")
    return pins


def resolve(python: str, constraints: Path | None) -> dict[str, str]:
    """{name: version} pip would install for `python`'s CPython on manylinux x86_64."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp, "report.json")
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--dry-run"]
        command += ["--ignore-installed", "--only-binary=:all:", "--python-version", python]
        command += [arg for platform in PLATFORMS for arg in ("--platform", platform)]
        command += ["--report", str(report), "-r", str(REQUIREMENTS), *torch_line()]
        if constraints is not None:
            command += ["--constraint", str(constraints)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if "ERROR" in line]
            sys.exit(
                f"image-constraints: the image's packages do not resolve for CPython {python}: "
                + (" / ".join(errors[-3:]) or done.stderr.strip()[-400:])
            )
        installs = json.loads(report.read_text())["install"]
    return {normalise(i["metadata"]["name"]): i["metadata"]["version"] for i in installs}


def pinned(resolved: dict[str, str]) -> dict[str, str]:
    return {n: v for n, v in resolved.items() if not TORCH_STACK.fullmatch(n)}


def read(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins[normalise(name)] = version
    return pins


def write() -> int:
    pins = pinned(resolve(PYTHONS[0], None))
    torch = torch_line()[0].split("==")[1]
    lines = [f"{name}=={pins[name]}" for name in sorted(pins)]
    CONSTRAINTS.write_text(HEADER.format(torch=torch) + "\n".join(lines) + "\n")
    print(f"{CONSTRAINTS.relative_to(ROOT)}: {len(lines)} packages for CPython {PYTHONS[0]}")
    return 0


def check() -> int:
    want = read(CONSTRAINTS)
    for python in PYTHONS:
        got = pinned(resolve(python, CONSTRAINTS))
        if got != want:
            extra = sorted(set(got) - set(want))
            unused = sorted(set(want) - set(got))
            moved = sorted(n for n in set(got) & set(want) if got[n] != want[n])
            print(
                f"image-constraints: {CONSTRAINTS.relative_to(ROOT)} no longer matches "
                f"requirements.txt for CPython {python} (not pinned: {extra}, not needed: "
                f"{unused}, other version: {moved}); run `make constraints`",
                file=sys.stderr,
            )
            return 1
    pythons = " and ".join(PYTHONS)
    print(f"image-constraints: {len(want)} pinned packages resolve for CPython {pythons}")
    return 0


def main(argv: list[str]) -> int:
    commands = {"write": write, "check": check}
    if len(argv) != 1 or argv[0] not in commands:
        print("usage: image-constraints.py write|check", file=sys.stderr)
        return 2
    return commands[argv[0]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
