"""The training command's process tree: roles and per-process read rates."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from diskinfo import loader_state
from diskinfo.collectors.procs import ProcsCollector, parse_pid_file, process_rates, settle
from diskinfo.collectors.proctree import ProcSnapshot
from diskinfo.collectors.roles import assign_roles, is_launcher
from diskinfo.record import IntervalRecord


def snap(pid, ppid, name, read=0, rchar=0, cpu=0.0, cmd="", born=1.0):
    return ProcSnapshot(pid, ppid, name, born, read, rchar, cpu, cmd)


TREE = [
    snap(10, 1, "bash"),
    snap(11, 10, "python3", cmd="python3 train.py"),
    snap(12, 11, "python3", cmd="python3 train.py"),
    snap(13, 11, "python3", cmd="python3 train.py"),
    snap(14, 11, "python3", cmd="python3 -c from multiprocessing.resource_tracker import main"),
    snap(15, 10, "tee"),
]


def test_roles_from_the_outermost_python_process():
    roles = assign_roles(TREE, root=10)
    assert roles == {
        10: "launcher",
        11: "main",
        12: "worker",
        13: "worker",
        14: "helper",
        15: "child",
    }


def test_roles_prefer_the_processes_that_publish_loader_figures():
    ddp = [
        snap(20, 1, "torchrun"),
        snap(21, 20, "python"),
        snap(22, 20, "python"),
        snap(23, 21, "python"),
        snap(24, 22, "python"),
    ]
    roles = assign_roles(ddp, root=20, publishers=[21, 22, 999])
    assert roles == {20: "launcher", 21: "main", 22: "main", 23: "worker", 24: "worker"}


def test_roles_without_publishers_take_every_rank_under_a_launcher():
    # torchrun unwrapped: each rank is a main process with its own DataLoader workers
    ddp = [
        snap(20, 1, "bash", cmd="bash -c torchrun --nproc-per-node 2 train.py"),
        snap(21, 20, "torchrun", cmd="/opt/venv/bin/python3 /opt/venv/bin/torchrun train.py"),
        snap(22, 21, "python3", cmd="/opt/venv/bin/python3 -u train.py"),
        snap(23, 21, "python3", cmd="/opt/venv/bin/python3 -u train.py"),
        snap(24, 22, "python3", cmd="/opt/venv/bin/python3 -u train.py"),
        snap(25, 23, "python3", cmd="/opt/venv/bin/python3 -u train.py"),
    ]
    roles = assign_roles(ddp, root=20)
    assert roles == {
        20: "launcher",
        21: "launcher",
        22: "main",
        23: "main",
        24: "worker",
        25: "worker",
    }


@pytest.mark.parametrize(
    "launcher",
    [
        "python -m torch.distributed.run --nproc-per-node 2 train.py",
        "python3 -m torch.distributed.launch train.py",
        "/usr/bin/python3 /opt/venv/bin/torchrun train.py",
        "/usr/bin/python3 /opt/venv/bin/accelerate launch train.py",
        "python -m accelerate.commands.launch train.py",
        "/usr/bin/python3 /usr/local/bin/deepspeed train.py",
    ],
)
def test_a_python_launcher_is_no_main(launcher):
    tree = [
        snap(30, 1, "python3", cmd=launcher),
        snap(31, 30, "python3", cmd="python3 train.py"),
        snap(32, 31, "python3", cmd="python3 train.py"),
    ]
    assert is_launcher(tree[0]) and not is_launcher(tree[1])
    assert assign_roles(tree, root=30) == {30: "launcher", 31: "main", 32: "worker"}


def test_roles_without_publishers_find_the_ranks_a_script_spawns():
    # torch.multiprocessing.spawn (the DDP tutorial's way): the script waits, its children
    # train, each with DataLoader workers of its own
    spawn = "python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)"
    tree = [
        snap(50, 1, "python3", cmd="python3 train_ddp.py"),
        snap(51, 50, "python3", cmd=f"{spawn} --multiprocessing-fork"),
        snap(52, 50, "python3", cmd=f"{spawn} --multiprocessing-fork"),
        snap(53, 51, "pt_data_worker", cmd=f"{spawn} --multiprocessing-fork"),  # PyTorch's name
        snap(54, 52, "python3", cmd=f"{spawn} --multiprocessing-fork"),
        snap(55, 50, "python3", cmd="python3 -c from multiprocessing.resource_tracker import main"),
    ]
    roles = assign_roles(tree, root=50)
    assert roles == {
        50: "launcher",
        51: "main",
        52: "main",
        53: "worker",
        54: "worker",
        55: "child",
    }
    # workers without children of their own stay workers (TREE above: one main, two workers)
    assert assign_roles(TREE, root=10)[11] == "main"


def test_torch_compiles_worker_pool_is_a_helper_and_no_rank():
    # inductor's SubprocPool: a compile_worker child of the script with a pool of its own
    pool = "python3 -m torch._inductor.compile_worker --pickler x --workers 2 --parent 60"
    tree = [
        snap(60, 1, "python3", cmd="python3 train.py"),
        snap(61, 60, "python3", cmd=pool),
        snap(62, 61, "python3", cmd=pool),
        snap(63, 60, "pt_data_worker", cmd="python3 train.py"),
    ]
    assert assign_roles(tree, root=60) == {60: "main", 61: "helper", 62: "child", 63: "worker"}


def test_a_script_that_only_mentions_a_launcher_is_still_main():
    p = snap(40, 1, "python3", cmd="python3 train.py --note torchrun")
    assert not is_launcher(p)
    assert assign_roles([p], root=40) == {40: "main"}


def test_rates_and_pid_reuse():
    prev = {
        p.key: p
        for p in [
            snap(11, 10, "python3", read=0, rchar=0, cpu=1.0),
            snap(12, 11, "python3", read=2**20, born=1.0),
        ]
    }
    cur = [
        snap(11, 10, "python3", read=2**21, rchar=2**22, cpu=2.0),
        snap(12, 11, "python3", read=0, born=5.0),
    ]  # same PID, a different process
    out = process_rates(prev, cur, {11: "main", 12: "worker"}, elapsed_s=2.0)
    main = next(p for p in out if p.pid == 11)
    assert main.read_mb_s == pytest.approx(1.0) and main.rchar_mb_s == pytest.approx(2.0)
    assert main.cpu_percent == pytest.approx(50.0)
    worker = next(p for p in out if p.pid == 12)
    assert worker.read_mb_s == 0.0 and worker.role == "worker"


@pytest.mark.parametrize("text", ["", "abc", "-3", "0"])
def test_bad_pid_files(text):
    with pytest.raises((ValueError, IndexError)):
        parse_pid_file(text)


def test_pid_file_with_newline():
    assert parse_pid_file("1234\n") == 1234


READ_FOR = r"""
import os, signal, sys, time
path = sys.argv[1]


def read_for(seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass
"""

READER = (
    READ_FOR
    + r"""
pids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        read_for(6)
        os._exit(0)
    pids.append(pid)
print("ready", flush=True)
for pid in pids:
    os.waitpid(pid, 0)
"""
)


@contextlib.contextmanager
def watched_tree(tmp_path, script: str) -> Iterator[tuple[subprocess.Popen, ProcsCollector]]:
    """`script` run on 8 MiB of data, with a collector on its tree once it printed "ready"."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"x" * (8 << 20))
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout.readline().strip() == b"ready"
        pid_file = tmp_path / "train.pid"
        pid_file.write_text(f"{proc.pid}\n")
        collector = ProcsCollector(str(pid_file), state_dir=tmp_path)
        collector.fill(IntervalRecord(ts=0, elapsed_s=1.0))
        yield proc, collector
    finally:
        proc.kill()
        proc.wait()


def test_a_real_tree_of_readers(tmp_path):
    with watched_tree(tmp_path, READER) as (_, collector):
        t0 = time.monotonic()
        time.sleep(1.0)
        record = IntervalRecord(ts=0, elapsed_s=time.monotonic() - t0)
        collector.fill(record)
    roles = sorted(p.role for p in record.procs)
    assert roles == ["main", "worker", "worker"]
    workers = [p for p in record.procs if p.role == "worker"]
    # page-cache reads: rchar moves, read_bytes (the storage layer) need not
    assert all(p.rchar_mb_s > 5 for p in workers), record.procs
    assert all(p.cpu_percent > 1 for p in workers)


def test_missing_pid_file_is_said_once(tmp_path):
    collector = ProcsCollector(str(tmp_path / "nope.pid"), state_dir=tmp_path)
    records = [IntervalRecord(ts=0, elapsed_s=1.0) for _ in range(3)]
    for r in records:
        collector.fill(r)
    assert [len(r.warnings) for r in records] == [1, 0, 0] and not records[2].procs


def test_an_empty_pid_file_is_no_training_command_and_no_warning(tmp_path):
    # the image makes the file empty; it stays so where no command runs (Jupyter or SSH only)
    pid_file = tmp_path / "train.pid"
    pid_file.write_text("")
    collector = ProcsCollector(str(pid_file), state_dir=tmp_path)
    records = [IntervalRecord(ts=0, elapsed_s=1.0) for _ in range(2)]
    for r in records:
        collector.fill(r)
    assert all(r.warnings == [] and r.procs == [] for r in records), records
    pid_file.write_text("garbage\n")  # a file with something else in it is still said
    collector.fill(record := IntervalRecord(ts=0, elapsed_s=1.0))
    assert [w.split(":")[0] for w in record.warnings] == ["procs"], record.warnings


def test_no_pid_file_option_means_no_process_figures(tmp_path):
    record = IntervalRecord(ts=0, elapsed_s=1.0)
    ProcsCollector(None, state_dir=tmp_path).fill(record)
    assert record.procs == [] and not record.warnings
    assert loader_state.FILE_PREFIX == "loader-"


def test_training_that_has_exited_is_said_once_and_never_breaks_the_collector(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # a PID that no longer runs, as after the training command ended
    pid_file = tmp_path / "train.pid"
    pid_file.write_text(f"{child.pid}\n")
    collector = ProcsCollector(str(pid_file), state_dir=tmp_path)
    records = [IntervalRecord(ts=0, elapsed_s=1.0) for _ in range(3)]
    for r in records:
        collector.fill(r)  # raised KeyError once the root was gone
    assert records[0].warnings == [f"procs: training PID {child.pid} is not running"]
    assert [r.warnings for r in records[1:]] == [[], []]
    assert all(r.procs == [] for r in records)


def test_training_seen_running_then_ended_is_no_warning(tmp_path):
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    pid_file = tmp_path / "train.pid"
    pid_file.write_text(f"{child.pid}\n")
    collector = ProcsCollector(str(pid_file), state_dir=tmp_path)
    running = IntervalRecord(ts=0, elapsed_s=1.0)
    collector.fill(running)
    assert [p.pid for p in running.procs] == [child.pid] and not running.warnings
    child.communicate(b"")  # a clean end
    after = [IntervalRecord(ts=0, elapsed_s=1.0) for _ in range(2)]
    for r in after:
        collector.fill(r)
    assert [r.warnings for r in after] == [[], []] and all(r.procs == [] for r in after)


def test_roles_when_the_root_is_not_in_the_tree():
    assert assign_roles([], 99) == {}
    # the root is gone but its python child is still the training script
    assert assign_roles([snap(12, 11, "python3")], 11) == {12: "main"}


def test_a_reaped_workers_reads_are_not_counted_again_under_main():
    """The kernel adds a reaped child's I/O to its parent's /proc/PID/io; without that taken
    off, every epoch's end showed all its workers' reads a second time, as one spike of main."""
    mib = 2**20
    prev = {
        p.key: p
        for p in [
            snap(11, 10, "python3", read=1 * mib, rchar=1 * mib),
            snap(12, 11, "python3", read=40 * mib, rchar=90 * mib),  # a worker, about to end
            snap(13, 11, "python3", read=0, rchar=0),  # one that ends unreaped this time
        ]
    }
    cur = [snap(11, 10, "python3", read=43 * mib, rchar=92 * mib)]  # own: 2 MiB and 1 MiB
    previous, owed = settle({}, prev, cur)
    out = process_rates(previous, cur, {11: "main"}, elapsed_s=1.0)
    assert out[0].read_mb_s == pytest.approx(2.0) and out[0].rchar_mb_s == pytest.approx(1.0)
    assert owed == {}  # paid in full

    # reaped a little later than it vanished (a zombie psutil could not read): paid then
    prev = {p.key: p for p in [*cur, snap(14, 11, "python3", read=8 * mib, rchar=8 * mib)]}
    later = [snap(11, 10, "python3", read=43 * mib, rchar=92 * mib)]
    previous, owed = settle({}, prev, later)
    assert process_rates(previous, later, {}, 1.0)[0].read_mb_s == 0.0
    assert [o.read_bytes for o in owed.values()] == [8 * mib]
    reaped = [snap(11, 10, "python3", read=52 * mib, rchar=100 * mib)]
    previous, owed = settle(owed, {p.key: p for p in later}, reaped)
    main = process_rates(previous, reaped, {}, 1.0)[0]
    assert main.read_mb_s == pytest.approx(1.0) and main.rchar_mb_s == 0.0 and owed == {}


REAPER = (
    READ_FOR
    + r"""
pid = os.fork()
if pid == 0:
    read_for(0.3)
    signal.pause()  # done reading: waits for the end of the epoch
    os._exit(0)
print("ready", flush=True)
sys.stdin.readline()
os.kill(pid, signal.SIGTERM)
os.waitpid(pid, 0)  # reaped: the kernel adds the worker's reads to this process's counters
print("reaped", flush=True)
time.sleep(30)
"""
)


def test_a_real_worker_reaped_at_the_epochs_end(tmp_path):
    with watched_tree(tmp_path, REAPER) as (proc, collector):
        time.sleep(0.6)
        reading = IntervalRecord(ts=0, elapsed_s=0.6)
        collector.fill(reading)  # the worker has read all it will read
        proc.stdin.write(b"end the epoch\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == b"reaped"
        reaped = IntervalRecord(ts=0, elapsed_s=0.6)
        collector.fill(reaped)
    worker = next(p for p in reading.procs if p.role == "worker")
    assert worker.rchar_mb_s > 5  # counted under the worker while it lived
    assert [p.role for p in reaped.procs] == ["main"]
    assert reaped.procs[0].rchar_mb_s < 1, reaped.procs  # was the worker's reads again


def test_a_shell_that_becomes_python_is_the_main(tmp_path):
    """The README's `bash -c "pip install -r ... && python code/train.py"`: bash runs pip,
    then execs python in its own PID. Seen as `bash` while pip ran, the PID must be seen as
    python afterwards, or the outermost-Python rule (no wrapper) misses the training script
    and its DataLoader workers are nobody's."""
    go = tmp_path / "go"
    script = (
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    time.sleep(30); os._exit(0)\n"
        "print('ready', flush=True); time.sleep(30)\n"
    )
    shell = subprocess.Popen(
        [
            "bash",
            "-c",
            f'while [ ! -e {go} ]; do sleep 0.05; done && exec "$0" -c "$1"',
            sys.executable,
            script,
        ],
        stdout=subprocess.PIPE,
    )
    try:
        pid_file = tmp_path / "train.pid"
        pid_file.write_text(f"{shell.pid}\n")
        collector = ProcsCollector(str(pid_file), state_dir=tmp_path)
        before = IntervalRecord(ts=0, elapsed_s=1.0)
        collector.fill(before)
        assert {p.pid: p.name for p in before.procs}[shell.pid] == "bash"
        go.touch()
        assert shell.stdout.readline().strip() == b"ready"
        time.sleep(0.2)
        after = IntervalRecord(ts=0, elapsed_s=1.0)
        collector.fill(after)
        roles = {p.pid: (p.role, p.name) for p in after.procs}
        assert roles[shell.pid][0] == "main" and "python" in roles[shell.pid][1], roles
        assert sorted(role for role, _name in roles.values()) == ["main", "worker"], roles
    finally:
        shell.kill()
        shell.wait()


def test_training_shorter_than_one_interval_is_no_warning(tmp_path):
    """The image's monitor samples every 5 s: a command that ended before the first sample
    printed 'training PID N is not running' in docker logs after its clean exit. Seen running
    at start, or named by a PID file written since the start: it ran and ended."""
    pid_file = tmp_path / "train.pid"
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    pid_file.write_text(f"{child.pid}\n")
    time.sleep(0.05)  # written well before the monitor starts
    collector = ProcsCollector(str(pid_file), state_dir=tmp_path)
    collector.start()  # the command runs now
    child.communicate(b"")
    collector.fill(record := IntervalRecord(ts=0, elapsed_s=5.0))
    assert record.warnings == [] and record.procs == []

    pid_file.unlink()
    collector = ProcsCollector(str(pid_file), state_dir=tmp_path)
    collector.start()  # no command yet
    time.sleep(0.05)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    pid_file.write_text(f"{child.pid}\n")  # written since the start, ended by the first sample
    child.wait()
    collector.fill(record := IntervalRecord(ts=0, elapsed_s=5.0))
    assert record.warnings == [] and record.procs == []


BUSY_PUBLISHER = r"""
import os, sys, time
from pathlib import Path
from diskinfo import loader_state
directory = Path(sys.argv[1])
loader_state.write_state(directory, loader_state.LoaderCounters(pid=os.getpid()))
if os.fork() == 0:  # a DataLoader worker of its own
    time.sleep(30); os._exit(0)
print("ready", flush=True)
deadline = time.time() + 30
while time.time() < deadline:  # a training loop's step: the CPU the verdict must see
    sum(i * i for i in range(10000))
"""


@pytest.mark.parametrize("with_command", [True, False], ids=["beside-command", "alone"])
def test_a_publisher_outside_the_commands_tree_is_a_main(tmp_path, with_command):
    """A notebook kernel, or a script started over SSH or with `docker exec`, iterates the
    wrapped loader but is no child of the supervised training command: its CPU (and its
    workers') must still reach the verdict, which read 0.0 cores for a kernel using 1.5."""
    command = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    loop = subprocess.Popen(
        [sys.executable, "-c", BUSY_PUBLISHER, str(tmp_path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert loop.stdout.readline().strip() == b"ready"
        pid_file = tmp_path / "train.pid"
        pid_file.write_text(f"{command.pid}\n" if with_command else "")
        collector = ProcsCollector(str(pid_file), state_dir=tmp_path)
        collector.fill(IntervalRecord(ts=0, elapsed_s=1.0))
        t0 = time.monotonic()
        time.sleep(1.0)
        record = IntervalRecord(ts=0, elapsed_s=time.monotonic() - t0)
        collector.fill(record)
    finally:
        for proc in (command, loop):
            proc.kill()
            proc.wait()
    roles = {p.pid: p.role for p in record.procs}
    assert roles[loop.pid] == "main", roles
    assert sorted(roles.values()) == (
        ["main", "main", "worker"] if with_command else ["main", "worker"]
    ), roles
    busy = next(p for p in record.procs if p.pid == loop.pid)
    # what it used, or wanted while this shared machine's other work held the cores
    assert busy.cpu_percent > 0 and busy.cpu_percent + busy.cpu_wait_percent > 30, record.procs
    assert not record.warnings


def test_schedstat_run_wait_is_the_second_field():
    from diskinfo.sources import ParseError
    from diskinfo.sources.schedstat import parse_run_wait_s, run_wait_s

    assert parse_run_wait_s("123456789 2500000000 42\n") == 2.5
    with pytest.raises(ParseError):
        parse_run_wait_s("garbage")
    assert run_wait_s(os.getpid()) >= 0.0 and run_wait_s(2**22 + 1) == 0.0  # no such process


def test_files_of_finished_runs_are_looked_at_once(tmp_path, monkeypatch):
    """Runs killed without their clean-up leave state files; each cost a /proc read every
    interval. A file found to be a finished run's is skipped while it stays as it was, and
    looked at again once rewritten (a new publisher that got the same PID)."""
    from diskinfo.collectors import proctree

    ours = tmp_path / f"{loader_state.FILE_PREFIX}{os.getpid()}.json"
    ours.write_text("{}")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / f"{loader_state.FILE_PREFIX}{dead.pid}.json"
    left.write_text("{}")
    (tmp_path / f"{loader_state.FILE_PREFIX}x.json").write_text("{}")  # not a PID: ignored
    looked: list[int] = []
    real = proctree.psutil.Process

    def counting(pid: int):
        looked.append(pid)
        return real(pid)

    monkeypatch.setattr(proctree.psutil, "Process", counting)
    past = time.time() - 10
    os.utime(tmp_path, (past, past))  # the folder settled: its stamp stands for its files
    publishers = proctree.LivePublishers()
    assert publishers(tmp_path) == {os.getpid()}
    assert publishers(tmp_path) == {os.getpid()}
    assert looked.count(dead.pid) == 1 and looked.count(os.getpid()) == 2
    fresh = tmp_path / "new"
    fresh.write_text("{}")
    os.replace(fresh, left)  # rewritten by rename, as publishers write: the folder's stamp moves
    publishers(tmp_path)
    assert looked.count(dead.pid) == 2
    left.unlink()
    assert publishers(tmp_path) == {os.getpid()} and not publishers._finished
