"""What every suite shares: `pytest.mark.tools(NAME, ...)` looks the programs up before the
test runs (tests/helpers/tools.py: a skip on a developer's machine, a failure under CI=true)."""

from __future__ import annotations

import pytest

from tests.helpers import tools


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "tools(*names, path=None): programs the test runs (skip, or fail under CI)"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("tools"):
        for name in mark.args:
            tools.find(name, path=mark.kwargs.get("path"))
