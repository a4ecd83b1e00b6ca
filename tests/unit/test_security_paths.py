"""Root's file work in directories others can write (docker/shared/safe_paths.py), the hook runner's
deadline (run_hook.py) and the log tee's sizes: with real links, FIFOs and processes."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.scripts import load

safe_paths = load("shared/safe_paths.py")
run_hook = load("start/run_hook.py")
log_tee = load("shared/log-tee.py")

NEEDS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
UID, GID = 4321, 4322


@pytest.fixture
def victim(tmp_path):
    """A file standing for /etc/shadow: it must keep its owner, mode and content."""
    path = tmp_path / "etc" / "shadow"
    path.parent.mkdir()
    path.write_text("root:secret\n")
    path.chmod(0o640)
    return path


def _unchanged(path, content="root:secret\n"):
    st = path.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), os.getegid(), 0o640)
    assert path.read_text() == content


@NEEDS_ROOT
def test_links_in_the_logs_directory_are_removed_never_followed(tmp_path, victim):
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chown(tmp_path, UID, GID)  # as /workspace is NB_USER's
    (logs / "sshd.log").symlink_to(victim)
    (logs / "train.log.2").symlink_to(tmp_path / "etc" / "new-file")
    os.mkfifo(logs / "jupyter.log")
    (logs / "diskinfo.jsonl").write_text("{}\n")
    os.link(victim, logs / "diskinfo.log")  # a hard link to "/etc/shadow": never handed over
    (logs / "notes.txt").write_text("mine")
    notes = safe_paths.prepare_logs(str(logs), UID, GID)
    _unchanged(victim)
    assert not (tmp_path / "etc" / "new-file").exists()
    assert sorted(os.listdir(logs)) == ["diskinfo.jsonl", "notes.txt"]
    assert (logs / "diskinfo.jsonl").stat().st_uid == UID
    assert any("sshd.log" in n and "symbolic link" in n for n in notes)
    assert any("jupyter.log" in n and "FIFO" in n for n in notes)
    assert (logs.stat().st_uid, logs.stat().st_gid) == (UID, GID)
    assert (logs / "notes.txt").stat().st_uid == os.geteuid()  # not the project's: left alone


@NEEDS_ROOT
def test_a_logs_directory_that_is_a_link_is_replaced(tmp_path, victim):
    (tmp_path / "logs").symlink_to(victim.parent)
    notes = safe_paths.prepare_logs(str(tmp_path / "logs"), UID, GID)
    assert (tmp_path / "logs").is_dir() and not (tmp_path / "logs").is_symlink()
    assert victim.parent.stat().st_uid == os.geteuid()
    _unchanged(victim)
    assert notes == [
        f"{tmp_path}/logs was a symbolic link to {victim.parent}:"
        " replaced with a directory (it must be one)"
    ]


@NEEDS_ROOT
def test_logs_of_a_run_with_another_uid_are_handed_over(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    os.chown(tmp_path, 1000, 100)  # as /workspace is NB_USER's
    for name in ("diskinfo.log", "diskinfo.jsonl", "train.log", "train.log.1"):
        (logs / name).write_text("x")
        os.chown(logs / name, 1000, 100)
    notes = safe_paths.prepare_logs(str(logs), 1234, 100)
    assert {(logs / n).stat().st_uid for n in os.listdir(logs)} == {1234}
    assert notes == [f"{logs}: 4 log file(s) of another uid are now uid 1234's"]


@NEEDS_ROOT
def test_a_link_on_the_way_to_the_logs_is_refused(tmp_path, victim):
    (tmp_path / "ws").symlink_to(victim.parent)
    os.chown(tmp_path / "ws", UID, GID, follow_symlinks=False)
    with pytest.raises(safe_paths.Refused, match="symbolic link in a directory others can write"):
        safe_paths.prepare_logs(str(tmp_path / "ws" / "logs"), UID, GID)
    assert not (victim.parent / "logs").exists()


@NEEDS_ROOT
def test_home_chown_skips_links_and_hard_links(tmp_path, victim):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").symlink_to(victim)
    (home / "etc").symlink_to(victim.parent)
    os.link(victim, home / "hard")
    (home / "own.txt").write_text("x")
    notes = safe_paths.chown_home(str(home), UID, GID)
    _unchanged(victim)
    assert (home / "own.txt").stat().st_uid == UID
    assert os.lstat(home / "etc").st_uid == os.geteuid()  # links are left as they are
    assert notes == [f"{home}: 1 hard-linked file(s) left as they were"]


def test_reads_are_bounded_regular_files(tmp_path, victim):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(safe_paths.Refused, match="a FIFO, not a regular file"):
        safe_paths.read_small(str(fifo), follow=True)
    assert time.monotonic() - start < 1
    (tmp_path / "big").write_bytes(b"x" * 100)
    with pytest.raises(safe_paths.Refused, match="larger than 10 bytes"):
        safe_paths.read_small(str(tmp_path / "big"), 10)
    (tmp_path / "link").symlink_to(victim)
    with pytest.raises(safe_paths.Refused, match="is a symbolic link"):
        safe_paths.read_small(str(tmp_path / "link"))
    assert safe_paths.read_small(str(tmp_path / "link"), follow=True) == b"root:secret\n"


def test_a_hook_leaving_a_background_job_is_killed_at_the_deadline(tmp_path):
    out = io.StringIO()
    pid_file = tmp_path / "bg.pid"
    start = time.monotonic()
    result = run_hook.run(
        ["sh", "-c", f"echo hi; sleep 600 & echo $! >{pid_file}; echo bye"], 1.5, out
    )
    assert time.monotonic() - start < 6
    assert result == "timeout 0"
    assert out.getvalue() == "hi\nbye\n"
    pid = int(pid_file.read_text())
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_hanging_hook_and_its_children_are_killed(tmp_path):
    pid_file = tmp_path / "child.pid"
    result = run_hook.run(["sh", "-c", f"sleep 600 & echo $! >{pid_file}; wait"], 1, io.StringIO())
    assert result == "timeout"
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_a_quick_hook_reports_its_status_and_detached_jobs_may_stay():
    assert run_hook.run(["sh", "-c", "exit 3"], 5, io.StringIO()) == "exit 3"
    start = time.monotonic()
    assert run_hook.run(["sh", "-c", "sleep 2 >/dev/null 2>&1 &"], 5, io.StringIO()) == "exit 0"
    assert time.monotonic() - start < 1.5


def test_a_hooks_output_forges_no_log_line_and_no_escape_code():
    out = io.StringIO()
    forged = "ok\\r\\x1b[2K2026-01-01 [INFO] all clear\\x1b]0;owned\\x07 \\u202egnp.exe"
    result = run_hook.run(["printf", forged + "\\nsecond\\n"], 5, out)
    assert result == "exit 0"
    assert out.getvalue().splitlines() == [
        "ok\\r\\x1b[2K2026-01-01 [INFO] all clear\\x1b]0;owned\\x07 \\u202egnp.exe",
        "second",
    ]


def test_a_hooks_file_name_is_one_startup_log_line(tmp_path):
    """The name is the user's (/workspace/.startup.d): a newline or escape code in it must
    not start a line of its own in docker logs."""
    script = ROOT / "docker/start/init.d/00-startup-log.sh"
    name = "x\n2026-01-01 00:00:00 INFO[forged] root shell opened\x1b[8m"
    out = subprocess.run(
        ["bash", "-c", f'. {script}; startup_log INFO "startup hook $1: running as root"',
         "sh", name],
        env={"STARTUP_STATE_DIR": str(tmp_path), "PATH": os.environ["PATH"]},
        capture_output=True, text=True, timeout=10,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    (line,) = out.stderr.splitlines()
    assert line.endswith("startup hook x?2026-01-01 00:00:00 INFO[forged] root shell opened?[8m:"
                         " running as root"), line  # fmt: skip


def test_log_tee_takes_sizes_with_units(tmp_path):
    read, write = os.pipe()
    os.write(write, b"a" * 3000)
    os.close(write)
    path = tmp_path / "train.log"
    path.write_bytes(b"b" * 2000)
    log_tee.tee(read, None, str(path), max_bytes=log_tee.parse_size("4K"), backups=2)
    assert path.read_bytes() == b"a" * 3000
    assert (tmp_path / "train.log.1").read_bytes() == b"b" * 2000


@NEEDS_ROOT
def test_a_directory_where_the_write_probe_was_does_not_stop_the_start(tmp_path):
    logs = tmp_path / "logs"
    (logs / ".write-test").mkdir(parents=True)  # the old fixed probe name, as jovyan can make it
    (logs / ".write-test" / "kept").write_text("mine")
    os.chown(tmp_path, UID, GID)
    assert safe_paths.prepare_logs(str(logs), UID, GID) == []
    assert (logs / ".write-test" / "kept").read_text() == "mine"
    assert sorted(os.listdir(logs)) == [".write-test"]  # the probe itself is gone


@pytest.mark.parametrize(
    "path",
    ["/", "/etc", "/etc/ssh/sshd_config.d", "/var/log", "/var/lib/x", "/usr/local/lib/x", "/run",
     "/tmp", "/home", "/root/logs", "/opt/venv/logs", "/var/run/x/../../etc"],
)  # fmt: skip
def test_system_directories_are_refused_by_name(path):
    with pytest.raises(safe_paths.Refused, match="is a system directory"):
        safe_paths.refuse_system_dir(os.path.realpath(path), None, None)


@pytest.mark.parametrize("path", ["/workspace/logs", "/run/diskinfo", "/scratch/l", "/var/tmp/l"])
def test_folders_of_their_own_are_allowed_by_name(path):
    safe_paths.refuse_system_dir(path, None, None)


@NEEDS_ROOT
def test_a_full_directory_of_roots_is_refused_and_left_as_it_was(tmp_path, victim):
    before = victim.parent.stat()
    with pytest.raises(safe_paths.Refused, match="directory of root's with files in it"):
        safe_paths.prepare_dir(str(victim.parent), UID, GID)
    after = victim.parent.stat()
    assert (after.st_uid, after.st_gid, after.st_mode) == (
        before.st_uid,
        before.st_gid,
        before.st_mode,
    )
    _unchanged(victim)
    sticky = tmp_path / "shared"
    sticky.mkdir()
    sticky.chmod(0o1777)
    with pytest.raises(safe_paths.Refused, match="shared directory"):
        safe_paths.prepare_dir(str(sticky), UID, GID)
    assert sticky.stat().st_uid == 0
    empty = tmp_path / "empty"  # nothing in it: nothing of the system's to hand over
    empty.mkdir()
    assert safe_paths.prepare_dir(str(empty), UID, GID) == []
    assert empty.stat().st_uid == UID


@NEEDS_ROOT
def test_the_real_etc_is_refused_before_anything_changes():
    before = os.stat("/etc")
    for verb in (safe_paths.prepare_logs, safe_paths.prepare_dir):
        with pytest.raises(safe_paths.Refused, match="/etc is a system directory"):
            verb("/etc", UID, GID)
    assert os.stat("/etc").st_uid == before.st_uid and os.stat("/etc").st_gid == before.st_gid


RACER = r"""
i=0
while :; do
  for p in "$@"; do
    i=$((i + 1))
    # moved away whole (a folder root is writing in cannot be emptied and removed), then gone
    mv -T "$p" "$p-$i"
    case $((RANDOM % 4)) in
      0) ln -s "$VICTIM" "$p" ;;
      1) mkfifo "$p" ;;
      2) mkdir -p "$p" && ln -s "$VICTIM" "$p/diskinfo.jsonl" ;;
      *) ;;
    esac
    rm -rf "$p"-*
  done 2>/dev/null
done
"""


@NEEDS_ROOT
def test_a_logs_folder_swapped_while_root_prepares_it_starts_or_is_refused():
    """`docker restart` while jovyan swaps /workspace/logs from a second container: each
    preparation ends with the folder ready or one refusal line, never an error that stops the
    start and never a step through a link."""
    # in /tmp itself: pytest's tmp_path is closed to other uids
    with tempfile.TemporaryDirectory(dir="/tmp") as top:
        ws = Path(top)
        ws.chmod(0o755)
        (ws / "etc").mkdir()
        victim = ws / "etc" / "shadow"
        victim.write_text("root:secret\n")
        victim.chmod(0o640)
        os.chown(ws, UID, GID)  # as /workspace is NB_USER's
        outcomes, notes = _race_log_preparation(ws / "logs", victim)
        _unchanged(victim)
    assert set(outcomes) <= {"ready", "something else replaces it"}, outcomes
    assert outcomes.get("ready", 0) > sum(outcomes.values()) / 2, outcomes
    assert any("removed" in n for n in notes), "the racer planted nothing root saw"


def _race_log_preparation(logs: Path, victim: Path) -> tuple[dict[str, int], list[str]]:
    # the folder every other turn: it is what root looks at and then opens
    paths = [p for n in ("startup.log", "sshd.log", "diskinfo.jsonl") for p in (logs, logs / n)]
    racer = subprocess.Popen(
        ["bash", "-c", RACER, "racer", *map(str, paths)],
        env={"VICTIM": str(victim)},
        user=UID,
        group=GID,
        stderr=subprocess.PIPE,
        text=True,
    )
    outcomes: dict[str, int] = {}
    notes: list[str] = []
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            try:
                notes += safe_paths.prepare_logs(str(logs), UID, GID)
                outcome = "ready"
            except safe_paths.Refused as exc:
                outcome = str(exc).split(": ", 1)[-1]
            except OSError as exc:
                outcome = f"OSError {exc.strerror}"
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        stopped = racer.poll()
    finally:
        racer.kill()
        err = racer.communicate()[1]
    assert stopped is None, f"the racer stopped ({stopped}): {err}"
    return outcomes, notes
