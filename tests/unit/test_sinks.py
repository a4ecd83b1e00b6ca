"""diskinfo.log and diskinfo.jsonl: format, rotation by size, a full or unwritable log dir."""

from __future__ import annotations

import errno
import io
import json
import os

import pytest

from diskinfo import rotating_file as rotating
from diskinfo.record import DeviceFigures, IntervalRecord, NfsFigures, ProcessIO
from diskinfo.rotating_file import RotatingFile
from diskinfo.sinks.jsonl import JsonlSink, encode
from diskinfo.sinks.textlog import TextLogSink, device_line, evidence_lines
from tests.helpers import ROOT, records


def record(**kw) -> IntervalRecord:
    """One busy NVMe device in a fixed interval (so a written line can be compared)."""
    fig = records.disk(
        rmb_s=512.3, r_s=4098.4, r_await=0.41, aqu_sz=1.68, rareq_sz=128.0, util=97.3, **kw
    )
    return records.record(fig, ts=1796217557.5, host="h")


def test_human_line():
    line = device_line(record().devices[0])
    assert line.startswith("[DiskIO] nvme0n1 /workspace/data: Read=512.30MB/s Write=0.00MB/s ")
    assert "r/s=4098.4" in line and "r_await=0.41ms" in line and line.endswith("util=97.3%")


def test_text_sink_writes_devices_nfs_and_warnings(tmp_path):
    rec = record()
    rec.nfs.append(NfsFigures(mount="/mnt/d", server="nas", read_bytes_s=2**20, read_ops_s=8))
    rec.warnings.append("disk: sda is not in /proc/diskstats (removed?)")
    echo = io.StringIO()
    sink = TextLogSink(str(tmp_path), echo=echo)
    sink.write(rec)
    sink.close()
    text = (tmp_path / "diskinfo.log").read_text()
    assert text.startswith("2026-") and "[DiskIO] nvme0n1" in text
    assert "[NFS] nas /mnt/d: Read=1.00MB/s" in text and "[warning] disk: sda" in text
    assert echo.getvalue() == text


def test_jsonl_line_is_the_record_and_nan_becomes_null(tmp_path):
    sink = JsonlSink(str(tmp_path))
    sink.write(record())
    sink.write(record(d_await=float("nan")))
    sink.close()
    lines = (tmp_path / "diskinfo.jsonl").read_text().splitlines()
    back = IntervalRecord.from_dict(json.loads(lines[0]))
    assert back == record()
    assert json.loads(lines[1])["devices"][0]["d_await"] is None
    assert encode(record()).endswith(b"}\n") and b"\n" not in encode(record())[:-1]


def test_jsonl_infinities_are_null_and_fields_keep_their_order():
    from diskinfo.record import GpuFigures, Verdict

    rec = record(w_await=float("inf"))
    rec.gpus = [GpuFigures(index=0, power_w=float("-inf"))]
    rec.verdict = Verdict(verdict="idle", input_share=float("nan"))
    line = json.loads(encode(rec))
    assert line["devices"][0]["w_await"] is None and line["gpus"][0]["power_w"] is None
    assert line["verdict"]["input_share"] is None
    assert list(line)[:4] == ["ts", "elapsed_s", "schema", "host"]
    assert list(line["devices"][0])[:3] == ["device", "paths", "r_s"]


def test_rotation_by_size_keeps_n_backups(tmp_path):
    path = tmp_path / "x.log"
    f = RotatingFile(str(path), max_bytes=1000, backups=2)
    for i in range(100):
        assert f.write(f"{i:04d} " + "x" * 94 + "\n")
    f.close()
    files = sorted(os.listdir(tmp_path))
    assert files == ["x.log", "x.log.1", "x.log.2"]
    assert all(os.path.getsize(tmp_path / n) <= 1000 for n in files)
    assert path.read_text().splitlines()[-1].startswith("0099")
    assert (tmp_path / "x.log.1").read_text().splitlines()[-1].startswith("0089")


def test_full_device_one_warning_and_sampling_goes_on(tmp_path, monkeypatch):
    def full(*_args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # every write, as /dev/full

    monkeypatch.setattr(rotating, "_write_all", full)
    err = io.StringIO()
    sink = JsonlSink(str(tmp_path))
    sink.file._stderr = err
    monkeypatch.setattr(rotating, "RETRY_S", 0.0)  # retry at every write: still one warning
    for _ in range(5):
        sink.write(record())
    sink.close()
    assert err.getvalue().count("diskinfo: warning") == 1 and "No space left" in err.getvalue()
    assert sink.file.dropped == 5


def test_planted_links_and_fifos_are_never_written_through_or_waited_on(tmp_path):
    """The log file is opened relative to the folder's descriptor with O_NOFOLLOW: a link at
    its name (to root's .bashrc, say) is refused, and so is a FIFO, without blocking."""
    target = tmp_path / "bashrc"
    target.write_text("# root's\n")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "diskinfo.log").symlink_to(target)
    os.mkfifo(logs / "diskinfo.jsonl")
    for name in ("diskinfo.log", "diskinfo.jsonl"):
        err = io.StringIO()
        f = RotatingFile(str(logs / name), stderr=err)
        assert not f.write("$(. /tmp/x)\n")
        assert "cannot write" in err.getvalue()
        f.close()
    assert target.read_text() == "# root's\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="root's rule")
def test_as_root_a_log_folder_another_account_can_write_is_refused(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chown(logs, 1234, 1234)
    err = io.StringIO()
    f = RotatingFile(str(logs / "diskinfo.log"), stderr=err)
    assert not f.write("x\n")
    assert "is writable by an account other than root" in err.getvalue()
    assert os.listdir(logs) == []
    (tmp_path / "link").symlink_to(tmp_path)  # the folder itself a link: refused too
    f = RotatingFile(str(tmp_path / "link" / "diskinfo.log"), stderr=err)
    assert not f.write("x\n") and not (tmp_path / "diskinfo.log").exists()


def test_unwritable_log_dir_then_recovery(tmp_path, monkeypatch):
    blocker = tmp_path / "logs"
    blocker.write_text("a file where the directory should be")
    err = io.StringIO()
    f = RotatingFile(str(blocker / "diskinfo.log"), stderr=err)
    monkeypatch.setattr(rotating, "RETRY_S", 0.0)
    assert not f.write("a\n") and not f.write("b\n")
    assert err.getvalue().count("diskinfo: warning") == 1
    blocker.unlink()
    assert f.write("c\n")
    assert "again (2 lines were dropped)" in err.getvalue()
    assert (blocker / "diskinfo.log").read_text() == "c\n"


def test_failed_writes_are_not_retried_before_the_retry_delay(tmp_path):
    (tmp_path / "x.log").symlink_to("/dev/full")
    f = RotatingFile(str(tmp_path / "x.log"), stderr=io.StringIO())
    assert not f.write("a\n")
    assert f._failed_at is not None and not f.write("b\n")
    assert f.dropped == 2


def test_a_line_cut_short_by_a_full_disk_is_ended_before_the_next(tmp_path, monkeypatch):
    path = tmp_path / "diskinfo.jsonl"
    path.write_text('{"complete":1}\n{"cut sh')  # what a full disk leaves behind
    f = RotatingFile(str(path), stderr=io.StringIO())
    f._failed_at = 0.0  # the previous write failed
    monkeypatch.setattr(rotating, "RETRY_S", 0.0)
    assert f.write('{"next":2}\n')
    assert path.read_text().splitlines()[-1] == '{"next":2}'


def test_a_restart_after_a_crash_starts_on_a_line_of_its_own(tmp_path):
    """Power loss or a kill mid-write leaves a cut line (or NULs) at the end; the restarted
    monitor's first record must not be glued to it, or the report loses that record too."""
    path = tmp_path / "diskinfo.jsonl"
    path.write_bytes(b'{"complete":1}\n{"cut sh\0\0\0')
    f = RotatingFile(str(path), stderr=io.StringIO())
    assert f.write('{"next":2}\n') and f.write('{"then":3}\n')
    assert path.read_bytes().split(b"\n")[-3:] == [b'{"next":2}', b'{"then":3}', b""]
    whole = tmp_path / "whole.jsonl"
    whole.write_text('{"complete":1}\n')
    assert RotatingFile(str(whole)).write('{"next":2}\n')
    assert whole.read_text() == '{"complete":1}\n{"next":2}\n'  # no blank line added


def test_schema_doc_covers_every_field_of_the_record():
    import dataclasses

    from diskinfo.record import SCHEMA

    doc = (ROOT / "docs" / "jsonl-schema.md").read_text()
    assert f"`{SCHEMA}`" in doc
    from diskinfo.record import (
        CgroupIO,
        GpuFigures,
        HostFigures,
        LoaderFigures,
        ProcessIO,
        Verdict,
    )

    kinds = (IntervalRecord, DeviceFigures, NfsFigures, GpuFigures, HostFigures, ProcessIO)
    for kind in (*kinds, LoaderFigures, Verdict, CgroupIO):
        for f in dataclasses.fields(kind):
            assert f"`{f.name}`" in doc, f"{kind.__name__}.{f.name} is not documented"


def test_fast_encoding_equals_to_dict():
    from diskinfo.record import GpuFigures, Verdict

    rec = record()
    rec.nfs.append(NfsFigures(mount="/m", server="s", counters={"read_ops": 3}))
    rec.gpus = [GpuFigures(index=0, name="H200")]
    rec.verdict = Verdict(verdict="idle", evidence=["e"], fixes=["f"])
    rec.devices[0].counters = {"rd_ios": 1}
    assert json.loads(encode(rec)) == json.loads(json.dumps(rec.to_dict()))


def test_procs_line_shows_the_top_readers_then_the_busiest():
    """Nobody reading (data in RAM): the process at 194% CPU leads, not one that read 1 kB."""
    rec = IntervalRecord(ts=0.0, elapsed_s=5.0)
    rec.procs = [
        ProcessIO(pid=113, name="sh", role="launcher"),
        ProcessIO(pid=117, name="python", role="main", cpu_percent=194.0),
        ProcessIO(pid=116, name="python", role="child", rchar_mb_s=0.001),
    ]
    line = next(x for x in evidence_lines(rec) if x.startswith("[Procs]"))
    assert line.split()[1::4] == ["main:117", "launcher:113", "child:116"], line
    rec.procs.append(ProcessIO(pid=120, name="python", role="worker", read_mb_s=3.0))
    line = next(x for x in evidence_lines(rec) if x.startswith("[Procs]"))
    assert line.split()[1::4] == ["worker:120", "main:117", "launcher:113", "child:116"], line
