"""log-tee.py keeps the program's output flowing whatever happens to its file: a logs folder
made unwritable before a rotation (the file is then given up with one loud line), and the
program on the other end of the pipe never sees an error."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.helpers import ROOT

PYTHON = "/usr/bin/python3"  # one the unprivileged user may run (the venv's may be root's)
USER = 1234
pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="runs the tee as another user"),
    pytest.mark.skipif(not os.path.exists(PYTHON), reason=f"no {PYTHON}"),
]


def test_an_unwritable_logs_folder_costs_the_file_not_the_output(open_tmp_path: Path):
    logs = open_tmp_path / "logs"
    logs.mkdir()
    os.chown(logs, USER, USER)
    # 71 kB: one rotation, near the end; long and short lines, so that a short one fits under
    # the size the failed rotation left (the old tee then wrote to the file it had closed)
    lines = [b"line %03d %s\n" % (i, b"x" * (900 if i % 2 else 20)) for i in range(150)]
    tee = subprocess.Popen(
        [
            "setpriv",
            f"--reuid={USER}",
            f"--regid={USER}",
            "--clear-groups",
            PYTHON,
            str(ROOT / "docker/shared/log-tee.py"),
            "--max-bytes",
            "64k",
            str(logs / "train.log"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert tee.stdin is not None and tee.stdout is not None
    passed = []
    for i, line in enumerate(lines):
        if i == 40:
            logs.chmod(0o555)  # the rotation near the end cannot rename any more
        tee.stdin.write(line)  # the program's write: must never fail
        tee.stdin.flush()
        passed.append(tee.stdout.readline())  # one line, one read of the tee's: as it runs
    out, err = tee.communicate(timeout=30)
    assert tee.returncode == 0, err
    assert b"".join(passed) + out == b"".join(lines)
    said = err.decode().splitlines()
    assert len(said) == 1 and said[0].startswith("log-tee: ERROR: cannot write "), said
    assert "Permission denied" in said[0] and "docker logs only" in said[0]
