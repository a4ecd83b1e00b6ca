"""`diskinfo watch` with a log directory that is read-only or fills up: sampling goes on
(the human lines keep coming on stdout), one warning per file and kind, SIGTERM still exits 0."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.loopdev import NEEDS_ROOT, mounted

pytestmark = [pytest.mark.system, pytest.mark.skipif(NEEDS_ROOT, reason="mounting needs root")]


def watch_for(log_dir: Path, seconds: float) -> tuple[int, str, str]:
    p = subprocess.Popen(
        [sys.executable, "-m", "diskinfo.cli", "watch", "/", "--interval", "0.2",
         "--log-dir", str(log_dir), "--echo", "always"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    time.sleep(seconds)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=20)
    return p.returncode, out, err


# mode=0755: root keeps a log folder only where root alone can write (tmpfs' default is 1777)


def test_read_only_log_dir(tmp_path):
    with mounted("tmpfs", str(tmp_path / "ro"), "-t", "tmpfs", "-o", "ro,size=1m,mode=0755") as ro:
        rc, out, err = watch_for(Path(ro) / "logs", 2.0)
    assert rc == 0 and "Traceback" not in err
    assert out.count("[DiskIO] ") >= 5  # sampling went on
    warnings = [line for line in err.splitlines() if "warning" in line]
    assert len(warnings) == 3, err  # one per log file (text and JSONL) and the lock, once each
    assert all("Read-only file system" in w for w in warnings)
    assert sum("cannot lock" in w for w in warnings) == 1


def test_full_log_dir_keeps_sampling_and_keeps_what_was_written(tmp_path):
    with mounted(
        "tmpfs", str(tmp_path / "full"), "-t", "tmpfs", "-o", "size=64k,mode=0755"
    ) as full:
        (Path(full) / "filler").write_bytes(b"\0" * 40 * 1024)
        rc, out, err = watch_for(Path(full), 4.0)
        jsonl = (Path(full) / "diskinfo.jsonl").read_text()
    assert rc == 0 and "Traceback" not in err
    assert out.count("[DiskIO] ") >= 12
    assert err.count("No space left on device") in (1, 2), err  # once per file at most
    lines = jsonl.splitlines()
    assert lines and all(line.endswith("}") for line in lines[:-1])
