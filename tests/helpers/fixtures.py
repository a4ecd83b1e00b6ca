"""Captured /proc and /sys trees (tests/fixtures/<name>/) as a Resolver and a diskstats text."""

from __future__ import annotations

from pathlib import Path

from diskinfo.resolve import Resolver
from diskinfo.sources import mountinfo
from diskinfo.sources.sysfs import SysFs

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def tree(name: str) -> Path:
    return FIXTURES / name


def resolver(name: str) -> Resolver:
    root = tree(name)
    mounts, errors = mountinfo.parse((root / "proc/self/mountinfo").read_text())
    assert not errors, errors
    return Resolver(mounts=mounts, sysfs=SysFs(str(root / "sys")), check_fs=False)


def text(name: str, rel: str) -> str:
    return (tree(name) / rel).read_text()
