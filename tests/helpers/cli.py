"""Running the CLI in-process as a user would, asserting the project's error contract."""

from __future__ import annotations

import pytest

from diskinfo import cli


def one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Bad input ends in one `diskinfo: error: ...` line on stderr and a non-zero exit."""
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and err.startswith("diskinfo: error: "), err
    return err
