"""Running the CLI in-process as a user would, asserting the project's error contract."""

from __future__ import annotations

import re

import pytest

from diskinfo import cli


def one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Bad input ends in one `diskinfo: error: ...` line on stderr (`diskinfo VERB: error: ...`
    where argparse refuses an argument of a verb) and a non-zero exit."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's refusal, before any work
        code = exc.code
    err = capsys.readouterr().err
    assert code not in (0, None)
    assert err.count("\n") == 1 and re.match(r"diskinfo( [a-z]+)?: error: ", err), err
    return err
