"""Any write failure of the monitor is a loud line: once per kind of failure, again after a
recovery, sampling never stopped by it. And the one rotation scheme, log-tee's too."""

from __future__ import annotations

import errno
import io
import os
import select
import subprocess
import sys
import time

import pytest

from diskinfo import rotating_file as rotating
from diskinfo.rotating_file import RotatingFile, rotate
from tests.helpers import ROOT


def _full_disk(*_args: object) -> int:
    """Every write, as a full disk answers it (the log file is opened with O_NOFOLLOW, so a
    link to /dev/full would be refused before any write)."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_each_kind_of_failure_is_said_once_and_again_after_a_recovery(tmp_path, monkeypatch):
    monkeypatch.setattr(rotating, "RETRY_S", 0.0)
    path = tmp_path / "diskinfo.log"
    err = io.StringIO()
    f = RotatingFile(str(path), stderr=err)
    writes = rotating._write_all
    monkeypatch.setattr(rotating, "_write_all", _full_disk)  # ENOSPC
    assert not f.write("a\n") and not f.write("b\n")
    monkeypatch.setattr(rotating, "_write_all", writes)
    path.unlink()
    path.mkdir()  # EISDIR: another kind, said too
    assert not f.write("c\n") and not f.write("d\n")
    lines = err.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "No space left on device" in lines[0] and "Is a directory" in lines[1]
    assert all(str(path) in line and "sampling goes on" in line for line in lines)
    path.rmdir()
    assert f.write("e\n")  # recovered: announced once
    assert "again (4 lines were dropped)" in err.getvalue()
    f.close()  # the next write opens the path again
    monkeypatch.setattr(rotating, "_write_all", _full_disk)
    assert not f.write("f\n")  # the same kind as before, but after a recovery: news again
    assert err.getvalue().count("No space left on device") == 2


def test_rotate_shifts_backups_and_drops_the_oldest(tmp_path):
    path = tmp_path / "train.log"
    for generation in range(4):
        path.write_text(f"gen{generation}\n")
        rotate(str(path), backups=2)
    assert sorted(os.listdir(tmp_path)) == ["train.log.1", "train.log.2"]
    assert (tmp_path / "train.log.1").read_text() == "gen3\n"
    assert (tmp_path / "train.log.2").read_text() == "gen2\n"
    path.write_text("x\n")
    rotate(str(path), backups=0)
    assert path.read_text() == ""


def test_log_tee_passes_bytes_through_and_rotates_with_the_shared_scheme(tmp_path):
    log = tmp_path / "train.log"
    data = b"".join(b"line %04d\n" % i for i in range(600))  # 6000 bytes
    tee = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "docker/shared/log-tee.py"),
            "--max-bytes",
            "1000",
            "--backups",
            "2",
            str(log),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert tee.stdin is not None
    for start in range(0, len(data), 300):  # separate reads, as a program's output arrives
        tee.stdin.write(data[start : start + 300])
        tee.stdin.flush()
        time.sleep(0.02)
    out, _ = tee.communicate(timeout=30)
    assert tee.returncode == 0 and out == data
    assert sorted(os.listdir(tmp_path)) == ["train.log", "train.log.1", "train.log.2"]
    names = ("train.log.2", "train.log.1", "train.log")
    kept = b"".join((tmp_path / n).read_bytes() for n in names)
    assert data.endswith(kept) and all(p.stat().st_size <= 1000 for p in tmp_path.iterdir())


def _readable(fd: int, wait_s: float) -> bool:
    return bool(select.select([fd], [], [], wait_s)[0])


def test_log_tee_gives_stdout_whole_lines_and_a_partial_line_soon(tmp_path):
    """stdout is shared with supervisord's own lines: a line's text and its newline, written
    apart (print under PYTHONUNBUFFERED), must go out together; a progress bar still shows."""
    tee = subprocess.Popen(
        [sys.executable, str(ROOT / "docker/shared/log-tee.py"), str(tmp_path / "train.log")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert tee.stdin is not None and tee.stdout is not None
    src, out = tee.stdin.fileno(), tee.stdout.fileno()
    os.write(src, b"started\n")
    assert os.read(out, 4096) == b"started\n"  # it runs: what follows is its doing
    os.write(src, b"ARGV=[1, 2]")
    assert not _readable(out, 0.03), "a line's start went out without its end"
    os.write(src, b"\n")
    assert os.read(out, 4096) == b"ARGV=[1, 2]\n"
    os.write(src, b"\r 50%|#####     |")  # tqdm: \r, then the bar, no newline
    assert _readable(out, 2.0), "a progress bar waited for a newline"
    assert os.read(out, 4096) == b"\r 50%|#####     |"
    for _ in range(15):  # a row of dots, one every 30 ms: shown as it grows, not at its end
        os.write(src, b".")
        time.sleep(0.03)
    assert _readable(out, 0.0), "dots 30 ms apart waited for a newline"
    shown = os.read(out, 4096)
    assert shown.startswith(b"...")
    while shown.count(b".") < 15 and _readable(out, 2.0):  # the rest, if any was left
        shown += os.read(out, 4096)
    assert shown == b"." * 15
    os.write(src, b"\r100%|##########|\ndone")
    assert os.read(out, 4096) == b"\r100%|##########|\n"
    tee.stdin.close()  # EOF: the last partial line goes out at once
    assert tee.stdout.read() == b"done"
    assert tee.wait(timeout=30) == 0
    assert (tmp_path / "train.log").read_bytes() == (
        b"started\nARGV=[1, 2]\n\r 50%|#####     |" + b"." * 15 + b"\r100%|##########|\ndone"
    )


class Trickle:
    """A file whose write(2) takes at most `most` bytes, or none at all."""

    def __init__(self, most: int) -> None:
        self.most, self.got = most, b""

    def write(self, data: bytes) -> int:
        self.got += bytes(data[: self.most])
        return min(len(data), self.most)


def test_short_writes_are_continued_and_a_stuck_write_is_an_error_not_a_spin():
    f = Trickle(3)
    assert rotating._write_all(f, b"0123456789\n") == 11 and f.got == b"0123456789\n"
    with pytest.raises(OSError, match="wrote nothing"):
        rotating._write_all(Trickle(0), b"line\n")
