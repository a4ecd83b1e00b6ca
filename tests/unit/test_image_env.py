"""The Dockerfile's ENV is the one place that gives the image's settings their defaults: no
script repeats one (a second copy drifts, and hides a script run without the image's
environment), and a script run outside the image says in one line which setting is missing."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.scripts import DOCKER

MISSING = "not set: the image sets it (Dockerfile ENV)"
# demo.py is a user's program that also runs outside the image (it says no monitor recorded
# it there): it falls back to where the image's monitor would write
USERS_OWN = {DOCKER / "run" / "demo.py"}


def image_env() -> dict[str, str]:
    """The Dockerfile's ENV settings, NAME -> value as written (build arguments unexpanded)."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    settings = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            for word in shlex.split(line[4:]):
                name, _, value = word.partition("=")
                settings[name] = value
    return settings


def image_scripts() -> list[Path]:
    """What runs in the container: the entrypoint and docker/'s configs and scripts."""
    found = [ROOT / "entrypoint.sh"]
    for folder in ("etc", "start", "run", "shared"):
        found += sorted(
            p for p in (DOCKER / folder).rglob("*") if p.is_file() and p.suffix != ".pyc"
        )
    return [p for p in found if p not in USERS_OWN]


def test_no_script_repeats_a_default_the_dockerfile_sets():
    settings = image_env()
    assert {"STARTUP_STATE_DIR", "PYTORCH_CUDA_LIB", "LOG_DIR", "JUPYTER_PORT"} <= set(settings)
    names = "|".join(sorted(settings))
    defaults = [
        re.compile(rf"\$\{{({names}):?-[^}}]"),  # ${LOG_DIR:-/workspace/logs}; ${X:-} is no default
        re.compile(rf"\.get\(\s*[\"']({names})[\"']\s*,\s*[\"'][^\"']"),  # env.get("X", "8888")
        re.compile(rf"\.get\(\s*[\"']({names})[\"']\s*\)\s*or\s*[\"']"),  # env.get("X") or "11.8"
    ]
    repeated = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in image_scripts()
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if any(pattern.search(line) for pattern in defaults)
    ]
    assert repeated == [], "the Dockerfile's ENV sets these; read them as they are"


@pytest.mark.parametrize(
    ("script", "args", "name"),
    [
        ("run/logged.sh", ["test", "true"], "PYTORCH_CUDA_LIB"),
        ("run/run-train.sh", [], "STARTUP_STATE_DIR"),
        ("run/start-jupyter.sh", [], "STARTUP_STATE_DIR"),
        ("run/diskinfo-monitor.sh", [], "STARTUP_STATE_DIR"),
        ("run/healthcheck.sh", [], "STARTUP_STATE_DIR"),
    ],
)
def test_a_script_run_without_the_images_settings_names_the_missing_one(script, args, name):
    done = subprocess.run(
        ["bash", str(DOCKER / script), *args],
        env={"PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.endswith(f"{name}: {MISSING}\n") and done.stderr.count("\n") == 1


def test_the_banner_run_without_the_images_settings_names_the_missing_ones():
    done = subprocess.run(
        [sys.executable, str(DOCKER / "start" / "banner.py")],
        env={"PATH": os.environ["PATH"], "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("banner: IMAGE_CUDA, LOG_DIR, NB_USER, JUPYTER_ENABLE,")
    assert done.stderr.endswith(" not set: the image sets them (Dockerfile ENV)\n")
