"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest

import diskinfo.torch as dt
from diskinfo import loader_state


@pytest.fixture
def loader_dir(monkeypatch, tmp_path):
    """A fresh diskinfo.torch meter publishing into tmp_path, closed after the test."""
    monkeypatch.setenv(loader_state.STATE_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(dt, "_meter", None)
    yield tmp_path
    if dt._meter is not None:
        dt._meter.close()
