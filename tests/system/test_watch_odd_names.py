"""A program whose name is not UTF-8 (a Latin-1 file name, as `caf\\xe9-reader`) in the watched
tree: every interval's JSONL record is still written, the name escaped, and nothing is said
every interval."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.system


def test_a_non_utf8_program_name_never_costs_a_record(tmp_path: Path):
    program = os.path.join(os.fsencode(tmp_path), b"caf\xe9-reader")
    shutil.copy(shutil.which("sleep") or "/bin/sleep", program)
    reader = subprocess.Popen([program, "60"])
    try:
        (tmp_path / "train.pid").write_text(f"{reader.pid}\n")
        watch = subprocess.Popen(
            [sys.executable, "-m", "diskinfo.cli", "watch", str(tmp_path), "--interval", "0.3",
             "--log-dir", str(tmp_path / "logs"), "--pid-file", str(tmp_path / "train.pid"),
             "--echo", "never", "--metrics-port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        time.sleep(4)
        watch.send_signal(signal.SIGTERM)
        _, err = watch.communicate(timeout=30)
    finally:
        reader.kill()
        reader.wait()
    records = [json.loads(line) for line in (tmp_path / "logs/diskinfo.jsonl").open()]
    assert len(records) >= 8, err  # about one every 0.3 s, none dropped
    names = {p["name"] for r in records for p in (r.get("procs") or [])}
    assert "caf\\xe9-reader" in names, names
    assert "UTF-8" not in err and "not valid" not in err, err
