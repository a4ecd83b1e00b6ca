"""log-tee.py on a logs folder that turns read-only mid-run (EROFS): the output keeps
flowing, the file is given up with one line, the writer never sees an error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT
from tests.helpers.loopdev import NEEDS_ROOT, mounted

pytestmark = [pytest.mark.system, pytest.mark.skipif(NEEDS_ROOT, reason="mounting needs root")]


def test_a_logs_filesystem_gone_read_only_costs_the_file_not_the_output(tmp_path):
    lines = [b"line %03d %s\n" % (i, b"x" * (900 if i % 2 else 20)) for i in range(150)]
    with mounted("tmpfs", str(tmp_path / "logs"), "-t", "tmpfs", "-o", "size=4m") as logs:
        tee = subprocess.Popen(
            [sys.executable, str(ROOT / "docker/shared/log-tee.py"), "--max-bytes", "64k",
             f"{logs}/train.log"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        assert tee.stdin is not None and tee.stdout is not None
        passed = []
        for i, line in enumerate(lines):
            if i == 40:  # the folder turns read-only under the open file (a bind made ro)
                subprocess.run(["mount", "--bind", logs, logs], check=True)
                subprocess.run(["mount", "-o", "remount,bind,ro", logs], check=True)
            tee.stdin.write(line)  # the program's write: must never fail
            tee.stdin.flush()
            passed.append(tee.stdout.readline())
        out, err = tee.communicate(timeout=30)
        subprocess.run(["umount", "-l", logs], check=False)  # the bind; `mounted` the tmpfs
    assert tee.returncode == 0, err
    assert b"".join(passed) + out == b"".join(lines)
    said = err.decode().splitlines()
    assert len(said) == 1 and "Read-only file system" in said[0], said
    assert said[0].startswith("log-tee: ERROR: cannot write ")
