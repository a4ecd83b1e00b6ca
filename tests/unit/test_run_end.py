"""How a run ended and what it ran: the [Run] line of a failed command, runs named by command."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from diskinfo import cli
from diskinfo.analyse.diagnoser import Diagnoser
from diskinfo.collectors.procs import ProcsCollector, command_end, command_line
from diskinfo.monitor import Monitor
from diskinfo.record import CommandEnd, IntervalRecord, ProcessIO
from diskinfo.report.summary import summarise
from diskinfo.report.text import ending
from diskinfo.sinks.jsonl import JsonlSink
from diskinfo.sinks.textlog import TextLogSink


def _run_line(tmp_path: Path, end: CommandEnd | None) -> str:
    """The [Run] line of 70 s of a command that ran without loop figures (the fix would be to
    wrap the DataLoader), ended as `end` says: in the record after it, as the monitor writes
    one when it is stopped right after the command."""
    echo = io.StringIO()
    sink = TextLogSink(str(tmp_path), echo=echo, console="verdicts")
    diag = Diagnoser({}, hold=1)
    for i in range(14):
        r = IntervalRecord(ts=1e9 + 5 * i, elapsed_s=5.0)
        r.procs = [ProcessIO(pid=7, name="python", role="main", cpu_percent=100)]
        r.verdict = diag(r)
        sink.write(r)
    if end is not None:
        r = IntervalRecord(ts=1e9 + 70.2, elapsed_s=0.2, command_end=end)
        r.verdict = diag(r)
        sink.write(r)
    sink.close()
    return echo.getvalue().splitlines()[-1].split(" ", 1)[1]


def test_a_failed_command_is_said_instead_of_a_fix(tmp_path):
    """A training command that died in `pip install` (exit 1 after 5 s) ended on "first fix
    to try: wrap the DataLoader ...": its own failure, not its input, ended the run."""
    line = _run_line(tmp_path, CommandEnd(code=1, ran_s=5.2))
    assert line.startswith("[Run] 70 s watched: unknown 100% | the training command failed: ")
    assert f"exit status 1 after 5 s (its output: above, and in {tmp_path}/train.log)" in line
    assert "first fix" not in line and f"diskinfo report {tmp_path}/diskinfo.jsonl" in line
    # a clean end, or none known, keeps the fix
    assert "first fix to try: wrap the DataLoader" in _run_line(tmp_path, CommandEnd(0, 70.0))
    assert "first fix to try: wrap the DataLoader" in _run_line(tmp_path, None)


def test_the_exit_status_beside_the_pid_file_is_this_commands(tmp_path):
    pid_file = tmp_path / "train.pid"
    exit_file = tmp_path / "train" / "exit"
    exit_file.parent.mkdir()
    exit_file.write_text("1\n")  # an earlier command's
    time.sleep(0.05)
    pid_file.write_text("123\n")
    assert command_end(str(pid_file)) is None  # this one still runs
    time.sleep(0.05)
    exit_file.write_text("137\n")
    end = command_end(str(pid_file))
    assert end is not None and end.code == 137 and 0 < (end.ran_s or 0) < 5
    exit_file.write_text("garbage")
    assert command_end(str(pid_file)) is None
    assert command_end(str(tmp_path / "none.pid")) is None


def test_command_lines_keep_no_secret_values():
    assert command_line("python train.py --lr 0.1 --api-key=abc --token xyz --epochs 3") == (
        "python train.py --lr 0.1 --api-key=*** --token *** --epochs 3"
    )
    assert command_line("python train.py --password") == "python train.py --password"


def test_the_record_names_the_training_command(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()", "--epochs", "3", "--token=s3"],
        stdin=subprocess.PIPE,
    )
    try:
        pid_file = tmp_path / "train.pid"
        pid_file.write_text(f"{child.pid}\n")
        record = IntervalRecord(ts=0, elapsed_s=1.0)
        ProcsCollector(str(pid_file), state_dir=tmp_path).fill(record)
    finally:
        child.communicate(b"")
    assert record.command.endswith("--epochs 3 --token=***"), record.command
    assert os.path.basename(sys.executable) in record.command


def test_report_names_compared_runs_by_their_commands(tmp_path, capsys):
    sink = JsonlSink(str(tmp_path))
    for started, command in ((100.0, "python a.py"), (200.0, "python train.py --lr 0.001 " * 4)):
        for i in range(3):
            r = IntervalRecord(ts=started + 5 * i, elapsed_s=5.0, started=started)
            r.command = command
            sink.write(r)
    sink.close()
    path = tmp_path / "diskinfo.jsonl"
    assert cli.main(["report", str(path), "--run", "1,2", "--no-png"]) == 0
    out = capsys.readouterr().out
    assert "run 1: python a.py" in out, out
    assert "run 2: python train.py --lr 0.001 python train.py --" in out, out
    assert cli.main(["report", str(path), "--run", "1", "--no-png"]) == 0
    assert f"{path} (run 1: python a.py)" in capsys.readouterr().out


def test_the_report_says_a_run_failed_from_the_jsonl_alone(tmp_path, capsys):
    """The command ends (exit 3) two seconds into a 5 s interval and the monitor is stopped at
    once, as the image stops it: the end is in one last, shorter record, and the report of
    that JSONL, wherever it is copied, says the run failed and how long it ran."""
    pid_file = tmp_path / "train.pid"
    (tmp_path / "train").mkdir()
    procs = ProcsCollector(str(pid_file), state_dir=tmp_path)
    monitor = Monitor(5.0, [procs], [JsonlSink(str(tmp_path))])
    thread = threading.Thread(target=monitor.run)
    thread.start()
    pid_file.write_text(f"{os.getpid()}\n")
    time.sleep(6)  # one whole interval while it runs
    (tmp_path / "train" / "exit").write_text("3\n")
    monitor.stop()
    thread.join(10)
    records = [json.loads(line) for line in (tmp_path / "diskinfo.jsonl").read_text().splitlines()]
    assert [r["command_end"] is not None for r in records] == [False, True]
    assert records[-1]["command_end"]["code"] == 3 and records[-1]["elapsed_s"] < 4.5
    copy = tmp_path / "elsewhere.jsonl"
    copy.write_text((tmp_path / "diskinfo.jsonl").read_text())
    assert cli.main(["report", str(copy), "--no-png"]) == 0
    out = capsys.readouterr().out
    assert "the training command FAILED: exit status 3 after 0m 06s" in out, out


def test_a_monitor_stopped_with_nothing_new_writes_no_extra_record(tmp_path):
    monitor = Monitor(5.0, [ProcsCollector(None, state_dir=tmp_path)], [JsonlSink(str(tmp_path))])
    thread = threading.Thread(target=monitor.run)
    thread.start()
    time.sleep(0.3)
    monitor.stop()
    thread.join(10)
    assert (
        not (tmp_path / "diskinfo.jsonl").exists() or not (tmp_path / "diskinfo.jsonl").read_text()
    )


def test_an_exit_status_from_before_the_monitor_started_is_not_this_runs(tmp_path):
    """A restarted container: the last start's PID and exit files are there until the new
    command writes its PID file; the monitor must not report that old end as this run's."""
    pid_file = tmp_path / "train.pid"
    pid_file.write_text("123\n")
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "exit").write_text("1\n")
    time.sleep(0.05)
    procs = ProcsCollector(str(pid_file), state_dir=tmp_path)
    record = IntervalRecord(ts=0, elapsed_s=1.0)
    procs.fill(record)
    assert record.command_end is None and not procs.unsaid()


def test_a_clean_end_and_a_kill_are_said_as_such():
    def said(code: int) -> str:
        record = IntervalRecord(ts=100.0, elapsed_s=5.0, command_end=CommandEnd(code, 65.0))
        return ending(summarise([record])) or ""

    assert said(0) == "the training command ended well (exit status 0 after 1m 05s)"
    assert said(137).startswith("the training command FAILED: exit status 137, killed by signal 9")
    assert ending(summarise([IntervalRecord(ts=100.0, elapsed_s=5.0)])) is None


def test_the_interval_after_the_end_says_how_it_ended_not_that_none_runs():
    """The monitor's last record after a failed command was judged `idle: no training command
    runs` and said so right after the failure; the record knows how it ended."""
    record = IntervalRecord(ts=100.0, elapsed_s=2.0, command_end=CommandEnd(1, 6.0))
    verdict = Diagnoser({}, hold=1)(record)
    assert verdict.summary == "the training command ended: exit status 1", verdict
    assert "no training command" in Diagnoser({}, hold=1)(IntervalRecord(ts=1, elapsed_s=2)).summary
