"""Fixtures shared by the unit tests."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

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


@pytest.fixture
def open_tmp_path():
    """A temporary folder every user can reach (pytest's own is root's 0700): for tests where
    root works for, or as, another user."""
    path = Path(tempfile.mkdtemp(prefix="diskinfo-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)
