"""The make variables that choose what is built and tested, checked on `make -n` (the real
builds need registries this machine cannot reach): the test venv and the stand-in install the
Dockerfile's torch line."""

from __future__ import annotations

import re
import subprocess

from tests.helpers import ROOT


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_test_venv_and_the_stand_in_run_the_dockerfiles_torch_line():
    text = (ROOT / "Dockerfile").read_text()
    pins = []
    for package, arg in (
        ("torch", "TORCH_VERSION"),
        ("torchvision", "TORCHVISION_VERSION"),
        ("torchaudio", "TORCHAUDIO_VERSION"),
    ):
        version = re.search(rf"^ARG {arg}=(\S+)$", text, re.M)
        assert version, arg
        pins.append(f"{package}=={version.group(1)}")
    venv = _make("dev", "VENV=/nonexistent-venv").stdout
    wheels = _make("stand-in-wheel", "STAND_IN_WHEELHOUSE=/nonexistent-wheelhouse").stdout
    for pin in pins:
        assert f"'{pin}'" in venv and pin in wheels, pin
    settings = _make("test-image", "BASE_IMAGE=x", "DOCKER=docker").stdout
    assert "--build-arg TORCH_VERSION" not in settings  # the Dockerfile's own line, in CI too
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make stand-in-wheel" in ci and "TORCH_VERSION=" not in ci
