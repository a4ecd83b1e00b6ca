"""How a run ended and what it ran: the [Run] line of a failed command, runs named by command."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from pathlib import Path

from diskinfo import cli
from diskinfo.analyse.diagnoser import Diagnoser
from diskinfo.collectors.procs import ProcsCollector, command_end, command_line
from diskinfo.record import CommandEnd, IntervalRecord, ProcessIO
from diskinfo.sinks.jsonl import JsonlSink
from diskinfo.sinks.textlog import TextLogSink


def _run_line(tmp_path: Path, end: CommandEnd | None) -> str:
    """The [Run] line of 5 s of a command that ran without loop figures (the fix would be to
    wrap the DataLoader), ended as `end` says."""
    echo = io.StringIO()
    sink = TextLogSink(str(tmp_path), echo=echo, console="verdicts", command_end=lambda: end)
    diag = Diagnoser({}, hold=1)
    for i in range(14):
        r = IntervalRecord(ts=1e9 + 5 * i, elapsed_s=5.0)
        r.procs = [ProcessIO(pid=7, name="python", role="main", cpu_percent=100)]
        r.verdict = diag(r)
        sink.write(r)
    sink.close()
    return echo.getvalue().splitlines()[-1].split(" ", 1)[1]


def test_a_failed_command_is_said_instead_of_a_fix(tmp_path):
    """A training command that died in `pip install` (exit 1 after 5 s) ended on "first fix
    to try: wrap the DataLoader ...": its own failure, not its input, ended the run."""
    line = _run_line(tmp_path, CommandEnd(code=1, ran_s=5.2))
    assert line.startswith("[Run] 70 s watched: unknown 100% | the training command failed: ")
    assert f"exit status 1 after 5 s (its output: {tmp_path}/train.log, docker logs)" in line
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
