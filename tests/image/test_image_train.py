"""The training command: run verbatim, logged twice, its exit code is the container's."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.image

# Each reaches the program unchanged: no shell, no supervisord %(...)s expansion.
TRICKY_ARGS = [
    "two words",
    'it\'s "quoted"',
    "100%",
    "%(ENV_HOME)s",
    "%(program_name)s",
    "$(touch /tmp/pwned)",
    "`id`",
    "a; touch /tmp/pwned",
    "$HOME",
    "*",
    "",
    "tab\there",
]
PRINT_ARGV = "import json, sys; print('ARGV=' + json.dumps(sys.argv[1:]))"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["true"], 0),
        (["bash", "-c", "echo failing; exit 3"], 3),
        # death by signal N -> 128 + N
        (["python3", "-c", "import os, signal; os.kill(os.getpid(), signal.SIGUSR1)"], 138),
        (["no-such-command"], 127),
    ],
    ids=["exit-0", "exit-3", "SIGUSR1-138", "not-found-127"],
)
def test_container_exits_with_the_training_commands_code(container, command, expected):
    running = container(*command)
    assert running.wait(timeout=60) == expected, running.logs()[-2000:]
    # a clean end leaves no alarm in docker logs: supervisord once SIGKILLed the listener that
    # had just ended on SIGTERM, in about one run of four (tests/unit/test_supervision.py)
    logs = running.logs()
    assert "SIGKILL" not in logs, logs[-2000:]
    # the listener ends itself once supervisord is shutting down, or on its SIGTERM
    assert re.search(r"INFO (exited|stopped): train-exit \(exit status 0", logs), logs[-2000:]
    # the listener ends the run through supervisord's control socket: a signal to PID 1 made
    # every end read "WARN received SIGTERM indicating exit request"
    assert "received SIGTERM" not in logs and "waiting for" in logs, logs[-2000:]
    assert "terminated by SIGTERM" not in logs, logs[-2000:]


def test_a_command_shorter_than_jupyterlabs_start_ends_without_a_warning(container):
    """`docker run IMAGE python -c "import torch; ..."` ends while JupyterLab is still starting:
    its stop was 'WARN stopped: jupyter (terminated by SIGTERM)'. Now a clean stop too."""
    running = container("echo", "checked", env={"JUPYTER_ENABLE": "1"})
    assert running.wait(timeout=60) == 0
    logs = running.logs()
    assert "checked" in logs and "stopped: jupyter (exit status 0)" in logs, logs[-2000:]
    assert [line for line in logs.splitlines() if " WARN " in line] == []  # supervisord's


def test_arguments_arrive_verbatim_in_docker_logs_and_train_log(container, tmp_path: Path):
    logs = tmp_path / "logs"
    logs.mkdir()
    running = container(
        "python3", "-c", PRINT_ARGV, *TRICKY_ARGS, volumes={str(logs): {"bind": "/workspace/logs"}}
    )
    assert running.wait(timeout=60) == 0
    for where, text in (
        ("docker logs", running.logs()),
        ("train.log", logs.joinpath("train.log").read_text()),
    ):
        lines = [line for line in text.splitlines() if line.startswith("ARGV=")]
        assert lines, f"no ARGV line in {where}:\n{text[-2000:]}"
        assert json.loads(lines[0][len("ARGV=") :]) == TRICKY_ARGS, where


def test_train_log_rotates_and_keeps_every_line(container, tmp_path: Path):
    logs = tmp_path / "logs"
    logs.mkdir()
    script = "for i in range(4000): print(f'line {i:05d} ' + 'x' * 50)"
    running = container(
        "python3",
        "-c",
        script,
        env={"TRAIN_LOG_MAX_BYTES": "65536", "TRAIN_LOG_BACKUPS": "9"},
        volumes={str(logs): {"bind": "/workspace/logs"}},
    )
    assert running.wait(timeout=60) == 0
    backups = sorted(logs.glob("train.log.*"), key=lambda p: int(p.suffix[1:]), reverse=True)
    files = [*backups, logs / "train.log"]  # oldest first
    assert len(files) >= 4, [p.name for p in files]
    assert all(p.stat().st_size <= 65536 for p in files)
    text = "".join(p.read_text() for p in files)
    assert [line.split()[1] for line in text.splitlines()] == [f"{i:05d}" for i in range(4000)]


def test_a_background_process_left_behind_does_not_hold_the_exit(container):
    running = container("bash", "-c", "sleep 300 & echo bye; exit 4")
    start = time.monotonic()
    assert running.wait(timeout=60) == 4
    assert time.monotonic() - start < 20
    assert "bye" in running.logs()


def test_no_argument_was_run_by_a_shell(container):
    running = container("sleep", "30", *TRICKY_ARGS[5:8])
    running.wait_for_program("train")
    code, _ = running.exec(["test", "-e", "/tmp/pwned"])
    assert code == 1, "an argument was executed by a shell"


def test_docker_stop_sends_sigterm_to_training_and_is_quick(container):
    script = (
        "trap 'echo caught SIGTERM; exit 7' TERM; echo training started; "
        "while :; do sleep 0.2; done"
    )
    running = container("bash", "-c", script)
    running.wait_for_program("train")
    time.sleep(1)
    start = time.monotonic()
    running.obj.stop(timeout=10)
    elapsed = time.monotonic() - start
    assert running.wait(timeout=5) == 7, running.logs()[-2000:]
    assert "caught SIGTERM" in running.logs()
    assert elapsed < 8, f"docker stop took {elapsed:.1f} s (grace period 10 s)"


def test_keep_alive_keeps_services_up_after_training_ends(container):
    running = container("bash", "-c", "exit 5", env={"KEEP_ALIVE": "1"})
    running.wait_for_program("train", "EXITED")
    time.sleep(2)
    assert running.status() == "running"
    assert running.supervisor_status().get("diskinfo") == "RUNNING"
    running.obj.stop(timeout=10)
    assert running.wait(timeout=10) == 5


def test_monitor_starts_first_and_restarts_without_disturbing_training(
    container, tmp_path, wait_until
):
    logs = tmp_path / "logs"
    logs.mkdir()
    running = container(
        "bash",
        "-c",
        "for i in $(seq 600); do echo step $i; sleep 0.1; done",
        volumes={str(logs): {"bind": "/workspace/logs"}},
        env={"DISKINFO_INTERVAL": "1"},
    )
    running.wait_for_program("diskinfo")
    running.wait_for_program("train")
    spawned = [
        line.split("'")[1]
        for line in logs.joinpath("supervisord.log").read_text().splitlines()
        if "spawned: '" in line
    ]
    assert spawned.index("diskinfo") < spawned.index("train"), spawned

    train_pid = int(running.read_file("/run/pytorch-cuda/train.pid"))
    monitor_pid = running.supervisor_pid("diskinfo")
    assert monitor_pid > 0
    code, out = running.exec(["kill", "-KILL", str(monitor_pid)])
    assert code == 0, out

    def restarted() -> bool:
        pid = running.supervisor_pid("diskinfo")
        return pid not in (0, monitor_pid) and running.supervisor_status()["diskinfo"] == "RUNNING"

    wait_until(restarted, 30, lambda: f"monitor not restarted: {running.supervisor_status()}")
    assert running.supervisor_status()["train"] == "RUNNING"
    assert int(running.read_file("/run/pytorch-cuda/train.pid")) == train_pid
    code, _ = running.exec(["kill", "-0", str(train_pid)])
    assert code == 0, "the training command died with the monitor"


def test_the_monitor_watches_the_users_program_not_the_log_tee(container, tmp_path, wait_until):
    # The log tee is a Python process beside the program. With the wrapper's PID as the tree's
    # root it was taken for the training process: [Procs] said main at 0% and the real program
    # "child" at 100%, and a run without diskinfo.torch is judged by those roles.
    logs = tmp_path / "logs"
    logs.mkdir()
    busy = "import time\nt = time.time()\nwhile time.time() - t < 90: pass"
    running = container(
        "python3",
        "-c",
        busy,
        volumes={str(logs): {"bind": "/workspace/logs"}},
        env={"DISKINFO_INTERVAL": "1"},
    )
    running.wait_for_program("train")
    pid = int(running.read_file("/run/pytorch-cuda/train.pid"))
    code, cmdline = running.exec(["bash", "-c", f"tr '\\0' ' ' </proc/{pid}/cmdline"])
    assert code == 0 and cmdline.startswith("python3 -c import time"), cmdline

    def procs_lines() -> list[str]:
        text = (logs / "diskinfo.log").read_text() if (logs / "diskinfo.log").exists() else ""
        return [line for line in text.splitlines() if "[Procs]" in line]

    def busy_main() -> bool:
        lines = procs_lines()
        found = lines and re.search(rf"\[Procs\] main:{pid} .*cpu=(\d+)%$", lines[-1])
        return bool(found) and int(found.group(1)) >= 50

    wait_until(busy_main, 40, lambda: f"no busy main:{pid} in {procs_lines()[-3:]}")
    last = procs_lines()[-1]
    assert re.findall(r"(\w+):(\d+) read=", last) == [("main", str(pid))], last  # nothing else


def test_two_runs_into_one_logs_folder_are_two_runs_to_report(container, tmp_path: Path):
    """README step 2 run again after a fix appends to the same logs/diskinfo.jsonl: report
    takes the last run, and `--run prev,last` puts the two side by side (it took the file as
    one run, both runs' figures mixed)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    mount = {str(logs): {"bind": "/workspace/logs"}}
    for _ in range(2):
        running = container(
            "python3", "-c", "import time; time.sleep(4)", volumes=mount,
            env={"DISKINFO_INTERVAL": "1"},
        )  # fmt: skip
        assert running.wait(timeout=90) == 0, running.logs()[-2000:]
    records = [
        json.loads(line) for line in logs.joinpath("diskinfo.jsonl").read_text().splitlines()
    ]
    starts = list(dict.fromkeys(r["started"] for r in records))
    assert len(starts) == 2 and all(starts), starts
    report = container(
        "report", "/workspace/logs/diskinfo.jsonl", "--run", "prev,last", "--no-png",
        volumes=mount, entrypoint="diskinfo",
    )  # fmt: skip
    assert report.wait(timeout=90) == 0, report.logs()[-2000:]
    out = report.logs()
    assert "/workspace/logs/diskinfo.jsonl holds 2 runs" in out, out
    assert "A: run 1" in out and "B: run 2" in out, out


def test_a_failed_command_ends_on_its_failure_not_on_a_fix(container, tmp_path: Path):
    """A training command that died in `pip install` (exit 1 after 5 s) ended docker logs on
    "first fix to try: wrap the DataLoader ...": the [Run] line now says the command failed,
    and so does the report of its JSONL. While `bash -c "pip ... && ..."` runs, the verdict
    knows a training command runs (it once said "no training command")."""
    folder = tmp_path / "logs"
    folder.mkdir()
    mount = {str(folder): {"bind": "/workspace/logs"}}
    running = container(
        "bash", "-c", "pip --version >/dev/null && sleep 6; echo 'ERROR: No matching "
        "distribution'; exit 1",
        env={"DISKINFO_INTERVAL": "2"}, volumes=mount,
    )  # fmt: skip
    assert running.wait(timeout=120) == 1, running.logs()[-2000:]
    logs = running.logs()
    run = [line for line in logs.splitlines() if "[Run]" in line]
    assert len(run) == 1, logs[-3000:]
    assert "| the training command failed: exit status 1 after " in run[0], run[0]
    assert "first fix to try" not in run[0], run[0]
    said = [line.split("[Verdict] ", 1)[1] for line in logs.splitlines() if "[Verdict] " in line]
    assert said and said[-1].startswith("idle: the training command ended: exit status 1"), said
    assert not any("no training command" in line for line in said), said
    report = container(
        "report", "/workspace/logs/diskinfo.jsonl", "--no-png", volumes=mount,
        entrypoint="diskinfo",
    )  # fmt: skip
    assert report.wait(timeout=90) == 0, report.logs()[-2000:]
    assert "the training command FAILED: exit status 1 after 0m 0" in report.logs(), report.logs()[
        -2000:
    ]
