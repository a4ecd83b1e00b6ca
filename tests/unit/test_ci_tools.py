"""CI installs every program a test looks up: a test that skips for a missing tool on CI's
fresh machine never runs where it counts (tests/helpers/tools.py fails it under CI=true)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.helpers import ROOT, tools

# each program the tests look up, and the Debian package .ci/run installs it from
PACKAGES = {
    "amtool": "prometheus-alertmanager",
    "prometheus-alertmanager": "prometheus-alertmanager",
    "prometheus": "prometheus",
    "promtool": "prometheus",
    "fio": "fio",
    "iostat": "sysstat",
    "ss": "iproute2",
    "losetup": "util-linux",
    "setpriv": "util-linux",
    "mkfs.ext4": "e2fsprogs",
    "mkfs.xfs": "xfsprogs",
    "mkfs.btrfs": "btrfs-progs",
    "chromium": "chromium",
    "chromium-browser": "chromium",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "scontrol": "slurm-client",
    "sinfo": "slurm-client",
    "munged": "munge",
    "gcc": "gcc",
    "make": "make",
    "npm": "npm",
    "node": "nodejs",
    "podman": "podman",
    "runc": "runc",
    "newuidmap": "uidmap",
}
# looked up, never installed: no GPU on CI (the test says so); coreutils is on every machine
NOT_INSTALLED = {"nvidia-smi", "sleep"}
LOOKUP = re.compile(r"(?:tools\.find|mark\.tools|shutil\.which)\(([^)]*)\)")
# Debian's essential packages, on every machine without being named
ESSENTIAL = {"util-linux", "e2fsprogs"}


def looked_up() -> set[str]:
    """Every literal program name in a lookup, and the names in the TOOLS tuples they pass."""
    names: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        if path == ROOT / "tests/conftest.py" or path == Path(__file__):
            continue  # the lookup of pytest.mark.tools' names itself, and the test below
        text = path.read_text()
        for args in LOOKUP.findall(text):
            names |= set(re.findall(r'(?<![f{])"([A-Za-z0-9_.+-]+)"', args))
            if "*TOOLS" in args:
                tools = re.search(r"^TOOLS = \(([^)]*)\)", text, re.M)
                assert tools, path
                names |= set(re.findall(r'"([^"]+)"', tools.group(1)))
    return names


def test_ci_installs_every_program_a_test_looks_up():
    installed = set(re.findall(r"[a-z0-9][a-z0-9.+-]+", (ROOT / ".ci/run").read_text()))
    names = looked_up() | {f"mkfs.{kind}" for kind in ("ext4", "xfs", "btrfs")}
    names -= NOT_INSTALLED
    unknown = sorted(n for n in names if n not in PACKAGES)
    assert not unknown, f"tests look up {unknown}: name their Debian package in PACKAGES"
    missing = sorted(
        f"{n} ({PACKAGES[n]})"
        for n in names
        if PACKAGES[n] not in installed and PACKAGES[n] not in ESSENTIAL
    )
    assert not missing, f".ci/run does not install {missing}"


def test_a_missing_program_skips_here_and_fails_under_ci(monkeypatch):
    monkeypatch.setattr(tools, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="no-such-program-x not installed"):
        tools.find("no-such-program-x")
    monkeypatch.setattr(tools, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        tools.find("no-such-program-x")
    assert tools.find("no-such-program-x", "sh") == shutil.which("sh")
