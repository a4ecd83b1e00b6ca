"""ProcFile re-reads a kept descriptor: the text must be the file's current text every time."""

from __future__ import annotations

import os

import pytest

from diskinfo.sources.procfile import CHUNK, ProcFile


def test_rereads_current_text_of_a_proc_file():
    f = ProcFile("/proc/self/stat")
    first, second = f.read(), f.read()
    assert first.split()[0] == str(os.getpid())
    # utime/stime or at least the text itself is regenerated; the layout stays the same
    assert len(first.split()) == len(second.split())
    f.close()


@pytest.mark.parametrize("size", [CHUNK - 1, CHUNK, CHUNK * 2, CHUNK * 2 + 17])
def test_reads_text_longer_than_one_chunk_and_sees_rewrites(tmp_path, size):
    path = tmp_path / "big"
    path.write_text("a" * size)
    f = ProcFile(str(path))
    assert f.read() == "a" * size
    with open(path, "r+") as handle:  # same inode, new contents
        handle.write("b" * 10)
        handle.truncate(10)
    assert f.read() == "b" * 10


def test_missing_file_raises_oserror_and_recovers(tmp_path):
    path = tmp_path / "later"
    f = ProcFile(str(path))
    with pytest.raises(FileNotFoundError):
        f.read()
    path.write_text("now\n")
    assert f.read() == "now\n"
