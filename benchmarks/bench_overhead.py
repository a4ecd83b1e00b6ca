"""CPU time per sample and peak RSS of `diskinfo watch --interval 1`, next to `iostat -dx 1`.

They run side by side over the same minute, three copies of each (their wake-ups spread over
the second); CPU is counted from the end of start-up (the first sample) to the end, so it is
the steady cost per sample. Two what-if rows beside them measure a monitor that would read at
every wake but analyse and write only every 5 or 10 s (the trade the iostat target would take).
Results go to benchmarks/results/overhead.md.

    sudo .venv/bin/python benchmarks/bench_overhead.py [--seconds 60] [--copies 3] [--path DIR]
    sudo .venv/bin/python benchmarks/bench_overhead.py --block-devices 10,16,24,32

Without --path it watches a small generated dataset (1000 files of 4 KiB), as a training
run watches its data directory. (Watching "/" also makes the host collector walk the whole
tree once to size the "dataset", which costs far more than sampling: not what this measures.)
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from diskinfo import logfiles

CORE = """
import signal, sys
from diskinfo.collectors.disk import DiskCollector
from diskinfo.collectors.watched import WatchedPaths
from diskinfo.monitor import Monitor
from diskinfo.sinks.jsonl import JsonlSink
from diskinfo.sinks.textlog import TextLogSink
m = Monitor(1.0, [DiskCollector(WatchedPaths([sys.argv[1]]))],
            [TextLogSink(sys.argv[2]), JsonlSink(sys.argv[2])])
m.install_signal_handlers()
sys.exit(m.run())
"""
# The floor under any Python monitor doing the same I/O: wake every second, pread the /proc
# and /sys files the full monitor holds open, encode a record like its last one (orjson, as
# the monitor's JSONL sink) and write it and a text line, with none of the parsing,
# analysis or formatting in between.
FLOOR = """
import json, os, sys, threading, time
import orjson
pid, log_dir, out_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
first = log_dir + "/diskinfo.jsonl"
while not os.path.exists(first) or not os.path.getsize(first):
    time.sleep(0.05)
with open(first) as f:
    record = json.loads(f.readline())
paths = set()
for fd in os.listdir(f"/proc/{pid}/fd"):
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        continue
    if target.startswith(("/proc/", "/sys/")):
        paths.add(target)
fds = [os.open(p, os.O_RDONLY) for p in sorted(paths)]
os.makedirs(out_dir, exist_ok=True)
jsonl = open(out_dir + "/floor.jsonl", "ab", buffering=0)
text = open(out_dir + "/floor.log", "ab", buffering=0)
wake = threading.Lock()
wake.acquire()
deadline = time.monotonic() + 1
while True:
    wake.acquire(True, max(0.0, deadline - time.monotonic()))
    deadline += 1
    for fd in fds:
        os.pread(fd, 65536, 0).decode()
    record["ts"] = time.time()
    jsonl.write(orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE))
    text.write(time.strftime("%Y-%m-%dT%H:%M:%SZ [DiskIO] ").encode() + b"x" * 150 + b"\\n")
"""
RESULTS = Path(__file__).resolve().parent / "results" / "overhead.md"
SCALING = RESULTS.with_name("overhead-devices.md")
TARGET_CORE_PCT, TARGET_RSS_MB = 0.1, 40.0
FLOOR_NAME = "python floor (same reads and writes, no logic)"
DEFER_KS = (5, 10)  # the what-if: analyse and write every K wakes
FULL, CORE_NAME, IOSTAT = (
    "diskinfo watch --interval 1",
    "diskinfo core (disk + logs only)",
    "iostat -dx 1",
)


def deferred(k: int) -> str:
    """The row of the what-if process that analyses and writes every k wakes."""
    return f"what-if: read every 1 s, analyse and write every {k} s"


def at(rev: str) -> str:
    """The row of the full monitor of an earlier revision (`--against`)."""
    return f"{FULL} at {rev}"


def cpu_s(p: psutil.Process) -> float:
    """CPU time of all the process's threads in ns resolution (/proc/PID/task/*/schedstat),
    where clock-tick accounting (10 ms) would be too coarse for a millisecond per sample."""
    total = 0.0
    try:
        for tid in os.listdir(f"/proc/{p.pid}/task"):
            with open(f"/proc/{p.pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0]) / 1e9
        return total
    except (OSError, ValueError, IndexError):
        t = p.cpu_times()
        return t.user + t.system


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def watch(path: str, log_dir: str, src: str | None = None) -> subprocess.Popen:
    """`diskinfo watch --interval 1`, from `src` (another revision's src/) if given."""
    env = dict(os.environ, PYTHONPATH=src) if src else None
    return subprocess.Popen(
        [sys.executable, "-m", "diskinfo.cli", "watch", path, "--interval", "1",
         "--log-dir", log_dir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
    )  # fmt: skip


def start_set(
    path: str, log_dir: str, against: tuple[str, str] | None = None
) -> dict[str, subprocess.Popen]:
    """One of each process measured, the floor reading what this set's full monitor reads;
    with `against` (revision, its src/), that revision's full monitor too."""
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    full = watch(path, log_dir)
    extra = {at(against[0]): watch(path, log_dir + "/against", against[1])} if against else {}
    return {
        FULL: full,
        # the same loop with only the disk collector and the two log files: what sampling
        # the devices costs, apart from the GPU, host, process and loader collectors
        CORE_NAME: subprocess.Popen([sys.executable, "-c", CORE, path, log_dir + "/core"], **quiet),
        IOSTAT: subprocess.Popen(["iostat", "-dx", "1"], **quiet),
        FLOOR_NAME: subprocess.Popen(
            [sys.executable, "-c", FLOOR, str(full.pid), log_dir, log_dir + "/floor"], **quiet
        ),
        **{
            deferred(k): subprocess.Popen(
                [sys.executable, __file__, "--deferred-child", str(k), path], **quiet
            )
            for k in DEFER_KS
        },
        **extra,
    }


def measure(
    seconds: float, path: str, copies: int = 3, against: tuple[str, str] | None = None
) -> dict[str, dict[str, float]]:
    """`copies` sets of the four processes side by side, their starts spread over a second so
    that each wakes alone (a process waking just after another finds the kernel's /proc code
    warm): a kind's figure is the mean over its copies, which evens out where each landed."""
    sets = []
    for _ in range(copies):
        log_dir = tempfile.mkdtemp(prefix="diskinfo-bench-")
        sets.append((log_dir, start_set(path, log_dir, against)))
        time.sleep(1.0 / copies)
    handles = [{k: psutil.Process(p.pid) for k, p in procs.items()} for _, procs in sets]
    time.sleep(3.0)  # start-up, the first sample, and the floor finding what to read
    start = [{k: cpu_s(h) for k, h in hs.items()} for hs in handles]
    t0 = time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    end = [{k: cpu_s(h) for k, h in hs.items()} for hs in handles]
    rss = [{k: peak_rss_mb(p.pid) for k, p in procs.items()} for _, procs in sets]
    for _, procs in sets:
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
    for _, procs in sets:
        for p in procs.values():
            p.wait(timeout=20)
    samples = sum(1 for _ in open(os.path.join(sets[0][0], logfiles.JSONL)))  # noqa: SIM115
    out = {}
    for k in sets[0][1]:
        used = [e[k] - s_[k] for s_, e in zip(start, end, strict=True)]
        mean = sum(used) / copies
        out[k] = {
            "cpu_s": mean,
            "startup_cpu_s": sum(s_[k] for s_ in start) / copies,
            "core_pct": mean / wall * 100,
            "ms_per_sample": mean / wall * 1000,  # one sample per second for all
            "ms_per_copy": [u / wall * 1000 for u in used],
            "peak_rss_mb": max(r[k] for r in rss),
            "wall_s": wall,
        }
    out[FULL]["samples"] = samples
    return out


@contextlib.contextmanager
def in_process_monitor(path: str) -> Iterator[list[tuple[str, object]]]:
    """`diskinfo watch`'s collectors, analyser and sinks, started, as (part name, step)
    pairs that one sample calls in order (a collector's fill, the analyser, a sink's write)."""
    from diskinfo.cli import build_parser
    from diskinfo.commands.watch import build_monitor

    log_dir = tempfile.mkdtemp(prefix="diskinfo-bench-parts-")
    args = build_parser().parse_args(["watch", path, "--log-dir", log_dir, "--echo", "never"])
    held = contextlib.ExitStack()  # the log folder's lock, for as long as the parts run
    monitor = build_monitor(args, held)
    steps: list[tuple[str, object]] = [
        (f"collector {type(c).__name__}", c.fill) for c in monitor.collectors
    ]
    if monitor.analyser is not None:
        steps.append(("analyser", monitor.analyser))
    steps += [(f"sink {type(sink).__name__}", sink.write) for sink in monitor.sinks]
    for c in monitor.collectors:
        c.start()
    try:
        yield steps
    finally:
        for c in monitor.collectors:
            c.stop()
        for sink in monitor.sinks:
            sink.close()
        held.close()


def deferred_child(k: int, path: str) -> int:
    """The what-if row: at every 1 s wake, pread each /proc and /sys file the monitor holds
    open (what a monitor must read when the interval ends); every k wakes, k whole samples of
    `diskinfo watch`'s collectors, analyser and sinks back to back. An upper bound for such a
    monitor, since each sample reads its files again. Runs until SIGTERM."""
    from diskinfo.record import IntervalRecord

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with in_process_monitor(path) as steps:

        def sample() -> None:
            rec = IntervalRecord(ts=time.time(), elapsed_s=1.0)
            for _, step in steps:
                step(rec)  # type: ignore[operator]

        sample()
        fds = []
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/self/fd/{fd}").startswith(("/proc/", "/sys/")):
                    fds.append(int(fd))
        pending: list[list[bytes]] = []
        deadline = time.monotonic() + 1
        while not stop.wait(max(0.0, deadline - time.monotonic())):
            deadline += 1
            pending.append([os.pread(fd, 65536, 0) for fd in fds])
            if len(pending) >= k:
                for _ in pending:
                    sample()
                pending.clear()
    return 0


def breakdown(path: str, n: int = 200) -> dict[str, float]:
    """CPU ms per sample of each collector, the analyser and each sink of `diskinfo watch`,
    in this process over n samples 20 ms apart (warmer than 1 s apart: a lower bound per part)."""
    from diskinfo.record import IntervalRecord

    cost: dict[str, float] = {}
    with in_process_monitor(path) as steps:
        for _ in range(n):
            time.sleep(0.02)
            rec = IntervalRecord(ts=time.time(), elapsed_s=0.02)
            for name, step in steps:
                t = time.process_time()
                step(rec)  # type: ignore[operator]
                cost[name] = cost.get(name, 0.0) + time.process_time() - t
    return {k: v / n * 1000 for k, v in cost.items()}


def warmth(path: str, gaps: tuple[float, ...] = (0.0, 0.02, 1.0), n: int = 30) -> dict:
    """CPU ms of one whole sample in this process when samples follow each other after
    `gaps` seconds of sleep, and after 1 s of busy-waiting (the CPU kept awake): how much of a
    sample's cost is its work and how much is finding code and data gone cold since the last."""
    from diskinfo.record import IntervalRecord

    def one(steps, elapsed: float) -> float:
        rec = IntervalRecord(ts=time.time(), elapsed_s=max(elapsed, 0.001))
        t = time.thread_time()
        for _, step in steps:
            step(rec)
        return time.thread_time() - t

    out: dict[str, float] = {}
    with in_process_monitor(path) as steps:
        for _ in range(20):  # past the first samples' one-off work
            time.sleep(0.02)
            one(steps, 0.02)
        for gap in gaps:
            runs = n if gap < 1 else n // 3  # a third as many 1 s gaps: time, not precision
            used = 0.0
            for _ in range(runs):
                time.sleep(gap)
                used += one(steps, gap)
            out[f"sleep {gap:g} s"] = used / runs * 1000
        used = 0.0
        for _ in range(n // 3):
            until = time.monotonic() + 1.0
            while time.monotonic() < until:
                pass
            used += one(steps, 1.0)
        out["busy 1 s"] = used / (n // 3) * 1000
    return out


def dataset_walk(files: int) -> dict[str, float]:
    """CPU and memory of the host collector's dataset-size walk (background, nice 19, hourly)
    over a generated tree of `files` small files in 100 directories."""
    import shutil
    import tracemalloc

    from diskinfo.collectors.host import DATASET_REFRESH_S, tree_size

    root = tempfile.mkdtemp(prefix="diskinfo-bench-walk-")
    try:
        for i in range(files):
            sub = Path(root, f"{i % 100:02d}")
            sub.mkdir(exist_ok=True)
            (sub / f"{i:07d}.jpg").write_bytes(b"x")
        t0 = time.process_time()
        size, complete = tree_size([root])
        cpu = time.process_time() - t0
        assert complete and size == files
        tracemalloc.start()  # a second walk for memory: tracing slows Python down many times
        tree_size([root])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    per_file_us = cpu / files * 1e6
    return {
        "files": files,
        "per_file_us": per_file_us,
        "peak_mb": peak / 2**20,
        "million_core_pct": per_file_us * 1e6 / 1e6 / DATASET_REFRESH_S * 100,
        "refresh_s": DATASET_REFRESH_S,
    }


def write(
    results: dict[str, dict[str, float]],
    seconds: float,
    path: str,
    parts: dict[str, float],
    walk: dict[str, float] | None = None,
    against: tuple[str, str] | None = None,
    warm: dict[str, float] | None = None,
) -> str:
    ours = results[FULL]
    lines = [
        "# Overhead of `diskinfo watch` (benchmarks/bench_overhead.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
        f"{platform.node()}: Linux {platform.release()}, {psutil.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, {len(block_devices())} block devices in /sys/block; "
        f"watched path `{path}`, {seconds:.0f} s "
        f"side by side, {len(ours['ms_per_copy'])} copies of each process with their starts "
        "spread over a second (each figure is the mean over the copies; the copies' own in "
        "brackets). CPU is counted after start-up (steady state); start-up CPU separately.",
        "",
        "| process | CPU per sample (ms) | % of one core | start-up CPU (s) | peak RSS (MB) |",
        "|---|---|---|---|---|",
    ]
    for name, r in results.items():
        each = ", ".join(f"{x:.3f}" for x in r["ms_per_copy"])
        lines.append(
            f"| `{name}` | {r['ms_per_sample']:.3f} ({each}) | {r['core_pct']:.4f} | "
            f"{r['startup_cpu_s']:.2f} | {r['peak_rss_mb']:.1f} |"
        )

    def cpu_ratio(name: str, base: str = IOSTAT) -> float:
        """CPU of row `name` over row `base`, both measured in this run."""
        below = results[base]["cpu_s"]
        return results[name]["cpu_s"] / below if below else float("inf")

    ratio = cpu_ratio(FULL)
    ok_cpu = ours["core_pct"] < TARGET_CORE_PCT
    ok_rss = ours["peak_rss_mb"] < TARGET_RSS_MB
    core_ratio = cpu_ratio(CORE_NAME)
    lines += [
        "",
        f"- diskinfo / iostat CPU ratio: {ratio:.2f}x for the full monitor, {core_ratio:.2f}x "
        f"for its disk-and-logs core; diskinfo wrote {ours['samples']} samples (JSONL lines).",
        f"- the Python floor (the same preads, one orjson encoding of a record and two writes per "
        f"second, nothing else) costs {results[FLOOR_NAME]['ms_per_sample']:.3f} ms: "
        f"{cpu_ratio(FLOOR_NAME):.2f}x iostat; the monitor's own logic "
        f"(parsing, figures, analysis, formatting) is the other "
        f"{ours['ms_per_sample'] - results[FLOOR_NAME]['ms_per_sample']:.3f} ms.",
        *(
            [
                f"- this code / `{against[0]}` in the same run: "
                f"{cpu_ratio(FULL, at(against[0])):.2f}x the CPU per sample."
            ]
            if against
            else []
        ),
        f"- target at or below iostat's CPU per sample (the cost a user already accepts): "
        f"{'met' if ratio <= 1.0 else 'NOT met'} by the full monitor, "
        f"{'met' if core_ratio <= 1.0 else 'NOT met'} by the core.",
        f"- target < {TARGET_CORE_PCT}% of one core: {'met' if ok_cpu else 'NOT met'}; "
        f"target < {TARGET_RSS_MB:.0f} MB RSS: {'met' if ok_rss else 'NOT met'}.",
        "- Where the time goes, per part of one sample (in-process, samples 20 ms apart, so "
        "the parts sum to less than the whole process's cost at 1 s): "
        + ", ".join(f"{k} {v:.3f} ms" for k, v in sorted(parts.items(), key=lambda x: -x[1]))
        + ".",
        "- CPU time is the on-CPU time the scheduler accounts per thread "
        "(/proc/PID/task/*/schedstat, nanoseconds), summed over the process's threads.",
    ]
    what_if = [k for k in DEFER_KS if deferred(k) in results]
    if what_if:
        lines.append(
            "- What-if, not the product (the `what-if` rows): a process that reads at every "
            "1 s wake the /proc and /sys files the monitor holds open, and runs K whole samples "
            "back to back every K wakes, costs "
            + ", ".join(
                f"{results[deferred(k)]['ms_per_sample']:.3f} ms per sample at K={k} "
                f"({cpu_ratio(deferred(k)):.2f}x iostat)"
                for k in what_if
            )
            + " (a sketch, not a bound: its wakes are bare preads where a real monitor's would run "
            "each collector's read, and each of its samples reads its files again). A monitor "
            "built so would come near or under the iostat target only by holding every JSONL "
            "line, log line, verdict and metric back by up to K seconds."
        )
    if warm:
        lines.append(
            "- The same whole sample in-process, by what came before it: "
            + ", ".join(f"after {k}: {v:.3f} ms" for k, v in warm.items())
            + ". Back to back is the work itself; the rest of a sample's cost at 1 s is "
            "finding the interpreter's code and data cold again, busy-waiting included, so "
            "fewer instructions buy little here: a smaller working set per wake (native code) "
            "would."
        )
    if walk:
        lines.append(
            f"- Dataset-size walk (host collector, background thread at nice 19, every "
            f"{walk['refresh_s']:.0f} s): {walk['per_file_us']:.2f} us of CPU per file over "
            f"{walk['files']:.0f} files, {walk['peak_mb']:.2f} MB peak allocation; for a "
            f"dataset of 1,000,000 files that averages {walk['million_core_pct']:.3f}% of "
            "one core, on top of the per-sample cost above."
        )
    lines.append("")
    return "\n".join(lines)


def block_devices() -> set[str]:
    return set(os.listdir("/sys/block"))


@contextlib.contextmanager
def block_devices_up_to(n: int) -> Iterator[None]:
    """Loop devices attached until /sys/block lists n block devices, for the run. iostat reads
    /proc/uptime, /proc/stat and every /sys/block/*/stat, twice per sample; the monitor one
    pread of /proc/diskstats, parsing only the watched device's line. So their costs part as
    a host has more block devices (a GPU server: several NVMe drives, loop devices of snaps
    and images), and this measures how."""
    backing = tempfile.mkdtemp(prefix="diskinfo-bench-loops-")
    before = block_devices()
    attached: list[str] = []
    try:
        for i in range(2 * n):  # a free loop device is used before a new one is made
            if len(block_devices()) >= n:
                break
            image = Path(backing, f"{i}.img")
            with open(image, "wb") as f:
                f.truncate(1 << 20)
            attached.append(
                subprocess.run(
                    ["losetup", "--find", "--show", str(image)],
                    capture_output=True, text=True, check=True,
                ).stdout.strip()
            )  # fmt: skip
        yield
    finally:
        for device in attached:
            subprocess.run(["losetup", "-d", device], check=False)
        remove_loop_devices(block_devices() - before)  # detached ones stay
        shutil.rmtree(backing, ignore_errors=True)


def remove_loop_devices(names: set[str]) -> None:
    """Delete free loop devices (LOOP_CTL_REMOVE), so that the host has its own count again."""
    loop_ctl_remove = 0x4C81
    fd = os.open("/dev/loop-control", os.O_RDWR)
    try:
        for name in names:
            if name.startswith("loop") and name[4:].isdigit():
                with contextlib.suppress(OSError):
                    fcntl.ioctl(fd, loop_ctl_remove, int(name[4:]))
    finally:
        os.close(fd)


@contextlib.contextmanager
def revision(rev: str) -> Iterator[tuple[str, str]]:
    """(short revision, its src/) for a git revision of this repository, checked out for the run:
    the same-run comparison that says whether a change made a sample cheaper."""
    root = Path(__file__).resolve().parents[1]
    short = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", rev],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    tree = tempfile.mkdtemp(prefix="diskinfo-bench-rev-")
    subprocess.run(
        ["git", "-C", str(root), "worktree", "add", "--detach", "-q", tree, short], check=True
    )
    try:
        yield short, str(Path(tree, "src"))
    finally:
        subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", tree])


def scaling(counts: list[int], seconds: float, path: str, copies: int) -> str:
    """The full monitor, its core and iostat, side by side, at each count of block devices."""
    rows = []
    for n in counts:
        with block_devices_up_to(n):
            have = len(block_devices())
            r = measure(seconds, path, copies)
        rows.append((have, r[FULL], r[CORE_NAME], r[IOSTAT]))
    lines = [
        "# Overhead of `diskinfo watch` as block devices are added (benchmarks/bench_overhead.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on "
        f"{platform.node()}: Linux {platform.release()}, {psutil.cpu_count()} CPUs, Python "
        f"{platform.python_version()}. Each row is one run as in overhead.md ({seconds:.0f} s, "
        f"{copies} copies of each process side by side), with loop devices attached (no I/O "
        "on them) until /sys/block lists that many block devices. `--block-devices "
        + ",".join(map(str, counts))
        + "`.",
        "",
        "| block devices | `diskinfo watch --interval 1` (ms/sample) | its disk-and-logs core "
        "| `iostat -dx 1` | full / iostat |",
        "|---|---|---|---|---|",
    ]
    ratios = []
    for have, full, core, iostat in rows:
        ratio = full["cpu_s"] / iostat["cpu_s"] if iostat["cpu_s"] else float("inf")
        ratios.append((have, ratio))
        lines.append(
            f"| {have} | {full['ms_per_sample']:.3f} | {core['ms_per_sample']:.3f} | "
            f"{iostat['ms_per_sample']:.3f} | {ratio:.2f}x |"
        )
    above = [n for n, r in ratios if r > 1.0]
    at_or_below = [n for n, r in ratios if r <= 1.0]
    lines += [
        "",
        "- the full monitor is at or below iostat's CPU per sample (the target) at "
        + (" and ".join(map(str, at_or_below)) or "none")
        + " block devices, above it at "
        + (" and ".join(map(str, above)) or "none")
        + ".",
        "- iostat opens, reads and closes /proc/uptime, /proc/stat and every /sys/block/*/stat"
        " twice per sample, so its cost grows with the devices; the monitor reads"
        " /proc/diskstats once and parses only the watched device's line, so its cost does not"
        " (the differences between its rows are this VM's noise).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--path", default=None, help="watched path (default: a small dataset)")
    ap.add_argument("--copies", type=int, default=3, help="side-by-side sets of processes")
    ap.add_argument(
        "--against", metavar="REV", help="also run the full monitor of this git revision"
    )
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--walk-files", type=int, default=100_000, help="0: skip the walk")
    ap.add_argument(
        "--block-devices", metavar="N,N...",
        type=lambda v: [int(n) for n in v.split(",")],
        help="instead: one run per count, loop devices attached until /sys/block lists that"
        f" many (root); results to {SCALING.name}",
    )  # fmt: skip
    ap.add_argument("--deferred-child", type=int, metavar="K", help=argparse.SUPPRESS)
    ap.add_argument("watched", nargs="?", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.deferred_child:
        return deferred_child(args.deferred_child, args.watched)
    if args.path is None:
        args.path = tempfile.mkdtemp(prefix="diskinfo-bench-data-")
        for i in range(1000):
            Path(args.path, f"{i:04d}.bin").write_bytes(b"\0" * 4096)
    if args.block_devices:
        text = scaling(args.block_devices, args.seconds, args.path, args.copies)
        print(text)
        if not args.no_write:
            SCALING.write_text(text)
        return 0
    with contextlib.ExitStack() as stack:
        against = stack.enter_context(revision(args.against)) if args.against else None
        results = measure(args.seconds, args.path, args.copies, against)
    walk = dataset_walk(args.walk_files) if args.walk_files > 0 else None
    text = write(
        results, args.seconds, args.path, breakdown(args.path), walk, against, warmth(args.path)
    )
    print(text)
    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(text)
    ours = results[FULL]
    return 0 if ours["core_pct"] < TARGET_CORE_PCT and ours["peak_rss_mb"] < TARGET_RSS_MB else 1


if __name__ == "__main__":
    sys.exit(main())
