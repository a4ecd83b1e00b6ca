"""The programs tests run (fio, prometheus, chromium, ...): found on PATH, or the test skips on
a developer's machine that lacks one and fails under CI=true, where .ci/run installs every one:
a check that skips on CI's fresh machine never runs where it counts.

In a test or fixture: `fio = tools.find("fio")`. For a whole test or module:
`pytest.mark.tools("fio", "iostat")` (tests/conftest.py looks them up before each test)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

from tests.helpers import ROOT

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str) -> NoReturn:
    """Skip, or under CI=true fail, with `reason`."""
    if IN_CI:
        pytest.fail(
            f"{reason} (CI=true: .ci/run installs it, so this check must run)", pytrace=False
        )
    pytest.skip(reason)


def find(*names: str, path: str | None = None) -> str:
    """The first of `names` on PATH (or on `path`): its full path; else missing()."""
    for name in names:
        found = shutil.which(name, path=path)
        if found:
            return found
    missing(f"{' or '.join(names)} not installed")


def artifact_dir(test: str) -> Path:
    """Where a test keeps what a person looks at afterwards (a screenshot): build/test-output/
    TEST in the checkout, or TEST_OUTPUT/TEST; kept between runs, as CI's artifacts."""
    root = Path(os.environ.get("TEST_OUTPUT") or ROOT / "build" / "test-output")
    directory = root / test
    directory.mkdir(parents=True, exist_ok=True)
    return directory
