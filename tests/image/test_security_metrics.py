"""The monitor's health and limits, in the built image with the shipped settings.

- A monitor that stops sampling (SIGSTOP: alive, but no longer sampling) makes the health
  check fail by its heartbeat's age and the container unhealthy; SIGCONT makes it healthy again.
- 200 held connections to the metrics port cost the monitor no thread, and a scrape is
  answered while they are held.
- A second `diskinfo watch` on the built-in monitor's log directory refuses with one line
  naming the running monitor (root or jovyan alike).
- Log files of another uid are one loud line each, naming both uids, and sampling goes on.
"""

from __future__ import annotations

import socket
import time
import urllib.request

import pytest

from tests.helpers import net
from tests.helpers.scrape import seconds

HEALTHCHECK = "/usr/local/lib/pytorch-cuda/run/healthcheck.sh"


def thread_count(running, pid: int) -> int:
    code, out = running.exec(["grep", "^Threads:", f"/proc/{pid}/status"])
    assert code == 0, out
    return int(out.split()[1])


def scrape_seconds(port: int) -> float:
    return seconds(port, must=b"diskinfo_records_total")


def test_a_stopped_monitor_makes_the_container_unhealthy_until_it_resumes(container, wait_until):
    running = container("sleep", "600")  # shipped DISKINFO_INTERVAL=5: limit 3 x 5 + 10 s
    wait_until(lambda: running.health() == "healthy", 90, lambda: f"health: {running.health()}")
    pid = running.supervisor_pid("diskinfo")
    assert pid
    code, out = running.exec(["kill", "-STOP", str(pid)])
    assert code == 0, out
    stopped = time.monotonic()
    try:
        assert running.supervisor_status()["diskinfo"] == "RUNNING"  # the old check's blind spot

        def failing() -> str | None:
            code, out = running.exec([HEALTHCHECK])
            return out if code == 1 else None

        out = wait_until(failing, 45, "the health check kept passing with a stopped monitor")
        assert f"diskinfo (pid {pid}) has not sampled for" in out and "limit" in out
        assert time.monotonic() - stopped >= 20  # not before the agreed 3 x interval + 10 s
        wait_until(lambda: running.health() == "unhealthy", 40, "the container stayed healthy")
        with pytest.raises(OSError):  # what the issue saw: /metrics dead while healthy
            urllib.request.urlopen(
                f"http://127.0.0.1:{running.ports['METRICS_PORT']}/metrics", timeout=2
            )
    finally:
        running.exec(["kill", "-CONT", str(pid)])
    wait_until(lambda: running.health() == "healthy", 40, "never healthy again after SIGCONT")
    assert running.supervisor_pid("diskinfo") == pid  # resumed, not restarted


@pytest.fixture(scope="module")
def monitored(module_container):
    running = module_container("sleep", "600")
    running.wait_for_program("diskinfo", timeout=60)

    def has_records() -> bool:
        code, _ = running.exec(["test", "-s", "/workspace/logs/diskinfo.jsonl"])
        return code == 0

    net.wait_until(has_records, 60, "the built-in monitor wrote no record")
    return running


def test_held_connections_cost_the_monitor_no_thread(monitored):
    port = monitored.ports["METRICS_PORT"]
    pid = monitored.supervisor_pid("diskinfo")
    scrape_seconds(port)
    before = thread_count(monitored, pid)
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(200)]
    try:
        assert scrape_seconds(port) < 1.0
        assert thread_count(monitored, pid) == before
    finally:
        for c in held:
            c.close()
    assert scrape_seconds(port) < 1.0


@pytest.mark.parametrize("user", ["root", "jovyan"])
def test_a_second_monitor_on_the_same_log_dir_refuses_naming_the_first(monitored, user):
    pid = monitored.supervisor_pid("diskinfo")
    before = monitored.read_file("/workspace/logs/diskinfo.jsonl").count("\n")
    code, out = monitored.exec(
        ["diskinfo", "watch", "/workspace/data", "--count", "3"], user=user, timeout=60
    )
    assert code == 1
    lines = out.strip().splitlines()
    if user == "root":  # root first became NB_USER, and said so
        assert lines.pop(0).startswith("diskinfo: running as jovyan (uid 1000)"), out
    assert len(lines) == 1 and lines[0].startswith("diskinfo: error: another diskinfo monitor")
    assert f"pid {pid}" in lines[0] and "diskinfo watch" in lines[0], lines[0]
    assert "/workspace/logs" in lines[0]
    # nothing of the refused one reached the built-in monitor's records: still one per interval
    time.sleep(1)
    after = monitored.read_file("/workspace/logs/diskinfo.jsonl").count("\n")
    assert after - before <= 2


def test_log_files_of_another_uid_are_one_loud_line_each(monitored):
    """The issue's reused logs directory: files of a uid-1000 run, a monitor as uid 1234."""
    code, out = monitored.exec(
        "mkdir -p /tmp/old-logs && touch /tmp/old-logs/diskinfo.log /tmp/old-logs/diskinfo.jsonl"
        " && chown -R 1000:100 /tmp/old-logs && chmod 0755 /tmp/old-logs"
    )
    assert code == 0, out
    code, out = monitored.exec(
        ["diskinfo", "watch", "/workspace", "--interval", "0.5", "--count", "4",
         "--log-dir", "/tmp/old-logs", "--echo", "always"],
        user="1234:100",
        timeout=60,
    )  # fmt: skip
    assert code == 0 and "Traceback" not in out, out
    assert out.count("[DiskIO] ") >= 4  # sampling went on
    loud = [line for line in out.splitlines() if "cannot write /tmp/old-logs/" in line]
    assert len(loud) == 2, out  # diskinfo.log and diskinfo.jsonl, once each
    # the notebook's verdict file, in the state folder this uid cannot write either: once
    assert sum("cannot write" in line for line in out.splitlines()) <= 3, out
    for line in loud:
        assert line.startswith("diskinfo: warning: ") and "Permission denied" in line
        assert "owner uid 1000" in line and "runs as uid 1234" in line
