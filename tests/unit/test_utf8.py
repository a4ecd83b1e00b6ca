"""Names the kernel hands over undecodable still make a JSONL record."""

from __future__ import annotations

import json
import os

from diskinfo.record import IntervalRecord, ProcessIO
from diskinfo.sinks.jsonl import JsonlSink
from diskinfo.utf8 import utf8_text


def test_latin1_bytes_become_escapes_and_valid_text_is_untouched():
    name = os.fsdecode(b"caf\xe9-reader")  # how psutil and os hand over a Latin-1 name
    assert utf8_text(name) == "caf\\xe9-reader"
    assert utf8_text("données-überall") == "données-überall"
    assert utf8_text("lone \ud800 surrogate") == "lone \\ud800 surrogate"


def test_a_record_holding_an_undecodable_name_is_still_written(tmp_path, capsys):
    sink = JsonlSink(str(tmp_path))
    record = IntervalRecord(ts=1.0, elapsed_s=1.0)
    record.procs = [ProcessIO(pid=7, name=os.fsdecode(b"caf\xe9"), role="main")]
    sink.write(record)
    sink.close()
    line = (tmp_path / "diskinfo.jsonl").read_text()
    assert json.loads(line)["procs"][0]["name"] == "caf\\xe9"
    assert "written with that text escaped" in capsys.readouterr().err
