"""`make build CUDA=12.8`, the Blackwell variant, reaches NVIDIA's CUDA 12.8 base and PyTorch's
cu128 index, and the default stays 11.8 (checked on `make -n`: the real build needs registries
this machine cannot reach). The test venv and the stand-in install the Dockerfile's torch line."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.helpers import ROOT


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    # Under `make test` the caller's variables (CI's BASE_IMAGE=local/bookworm:base, ...) reach
    # this process twice, in MAKEFLAGS and exported one by one, and would override the defaults
    # this test checks: it runs make as a user's plain shell would, with a path and a home only.
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    return subprocess.run(
        ["make", "-n", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _build_args(*args: str) -> dict[str, str]:
    out = _make("build", "DOCKER=docker", *args)
    assert out.returncode == 0, out.stderr
    found = dict(re.findall(r"--build-arg (BASE_IMAGE|CUDA|TORCH_INDEX_URL)=(\S+)", out.stdout))
    found["tag"] = re.search(r" -t (\S+)", out.stdout).group(1)
    return found


@pytest.mark.parametrize(
    ("args", "base", "cuda", "index", "tag"),
    [
        ((), "nvidia/cuda:11.8.0-base-ubuntu22.04", "11.8", "cu118", "latest"),
        (("CUDA=12.8",), "nvidia/cuda:12.8.1-base-ubuntu22.04", "12.8", "cu128", "cu128"),
    ],
)
def test_each_cuda_variant_reaches_its_base_and_index(args, base, cuda, index, tag):
    assert _build_args(*args) == {
        "BASE_IMAGE": base,
        "CUDA": cuda,
        "TORCH_INDEX_URL": f"https://download.pytorch.org/whl/{index}",
        "tag": f"pytorch-cuda-diskinfo:{tag}",
    }


def test_settings_given_win_over_the_variants():
    found = _build_args("CUDA=12.8", "BASE_IMAGE=local/bookworm:base", "IMAGE=mine:1")
    assert found["BASE_IMAGE"] == "local/bookworm:base" and found["tag"] == "mine:1"
    assert found["TORCH_INDEX_URL"].endswith("/cu128")


def test_an_unknown_cuda_is_one_line():
    out = _make("build", "CUDA=12.4")
    assert out.returncode != 0
    assert "CUDA=12.4 is not a variant of this image: 11.8 (default) or 12.8" in out.stderr


def test_the_dockerfile_derives_the_index_and_nvcc_from_cuda():
    """Plain `docker build --build-arg CUDA=12.8` gets the cu128 index and cuda-nvcc-12-8."""
    text = (ROOT / "Dockerfile").read_text()
    assert "index=${TORCH_INDEX_URL:-https://download.pytorch.org/whl/cu${CUDA//./}}" in text
    assert "v=${CUDA//./-}" in text and '"cuda-nvcc-$v"' in text
    assert "11-8" not in text


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
