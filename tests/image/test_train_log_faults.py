"""Faults of the training's log copy never cost the training: a logs folder made unwritable
mid-run and a log tee killed with SIGKILL leave the program running to its own exit code,
every line in docker logs, and the failure said once."""

from __future__ import annotations

import pytest

from tests.helpers import net

pytestmark = pytest.mark.image

# 150 lines of varied length, one every 40 ms; exit 5. 64k rotates the log near line 120.
TRAIN = (
    "import sys, time\n"
    "for i in range(150):\n"
    "    print(f'line {i:03d} ' + 'x' * (900 if i % 2 else 20), flush=True)\n"
    "    time.sleep(0.04)\n"
    "sys.exit(5)\n"
)


def _lines(logs: str) -> list[str]:
    return [w.split()[1] for w in logs.splitlines() if w.startswith("line ") and len(w) > 8]


def _run_until_line_40(container):
    running = container("python3", "-c", TRAIN, env={"TRAIN_LOG_MAX_BYTES": "64k"})
    net.wait_until(lambda: "line 040" in running.logs(), 60, "the training never printed")
    return running


def test_an_unwritable_logs_folder_keeps_the_training_and_its_exit_code(container):
    running = _run_until_line_40(container)
    code, out = running.exec("chmod 0555 /workspace/logs")
    assert code == 0, out
    assert running.wait(timeout=60) == 5
    logs = running.logs()
    assert _lines(logs) == [f"{i:03d}" for i in range(150)], logs[-2000:]
    said = [w for w in logs.splitlines() if "log-tee: ERROR: cannot write" in w]
    assert len(said) == 1 and "/workspace/logs/train.log" in said[0], said


def test_a_killed_log_tee_keeps_the_training_and_its_exit_code(container):
    running = _run_until_line_40(container)
    code, out = running.exec("pkill -KILL -f '[l]og-tee.py --max-bytes'")
    assert code == 0, out
    assert running.wait(timeout=60) == 5
    logs = running.logs()
    seen = _lines(logs)
    # what the killed tee had read and not yet passed on is lost, nothing else
    assert seen[-1] == "149" and len(seen) >= 145, logs[-2000:]
    said = [w for w in logs.splitlines() if "the log tee ended" in w]
    assert len(said) == 1, said
