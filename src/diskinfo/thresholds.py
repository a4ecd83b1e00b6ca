"""Every threshold of the verdicts and of node pressure, in one place (docs/verdicts.md).

Figures compared with a threshold are printed by `shown`, which never rounds across it:
a 19.76% share is "19.8%", not "20%", where 20% is the line of "highly input-bound".
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated


@dataclass(frozen=True)
class Doc:
    """A threshold's line in docs/verdicts.md, declared with the threshold itself."""

    unit: str
    meaning: str


# --- input share (XProf) ---
HIGHLY_INPUT_BOUND: Annotated[
    float, Doc("share", "data-wait share of step time: highly input-bound")
] = 0.20
MODERATELY_INPUT_BOUND: Annotated[
    float, Doc("share", "moderately input-bound (input-bound only with a starving GPU)")
] = 0.05
LOOP_ACTIVE_SHARE: Annotated[
    float,
    Doc("share", "loop time per process over the interval under this: the loop is not running"),
] = 0.10  # loop time (wait + step) per process / interval below this: not running

# --- GPU ---
GPU_IDLE_MEAN_PCT: Annotated[
    float, Doc("%", "mean utilisation under this: the GPU does nothing")
] = 5.0  # mean utilisation below this: the GPU does nothing
GPU_BUSY_MEAN_PCT: Annotated[
    float, Doc("%", "a compute-bound GPU under this: the step's CPU side is the limit")
] = 70.0
GPU_STARVED_IDLE_FRACTION: Annotated[
    float, Doc("share", "share of samples idle: the GPU starves")
] = 0.25  # share of samples idle
GPU_PULSING: Annotated[float, Doc("0..1", "pulsing at or above this: the GPU starves")] = 0.30
GPU_IN_USE_PCT: Annotated[
    float, Doc("%", "a GPU that never reaches this is not used by training (no GPU fixes)")
] = 1.0  # a GPU whose utilisation never reaches this is not used by training
GPU_SAMPLE_IDLE_PCT: Annotated[float, Doc("%", "one utilisation sample below this is idle")] = (
    10.0  # one utilisation sample below this is idle
)
GPU_SAMPLE_BUSY_PCT: Annotated[
    float, Doc("%", "one utilisation sample at or above this is busy")
] = 80.0  # one utilisation sample at or above this is busy

# --- CPU (the container's own where readable) ---
# (the container's own cgroup where readable, else the host's)
CPU_SATURATED_PCT: Annotated[
    float, Doc("%", "of the cores the container may use: `cpu-saturated`")
] = 90.0  # percent of the cores the container may use
PROC_SATURATED_PCT: Annotated[
    float,
    Doc(
        "% of a core",
        "a loader process wanting this computes, not waits (`no-workers`, `few-workers`)",
    ),
] = 80.0  # one loader process, percent of one core: it computes, not waits
# a worker that gets this many points of a core less than it wants: the host's other work takes
# the rest (said in the cause's words)
CPU_WAIT_SHOWN_PCT: Annotated[
    float,
    Doc(
        "% of a core",
        "a worker getting this much less than it wants: the host's work takes the rest",
    ),
] = 5.0
IOWAIT_HIGH_PCT: Annotated[float, Doc("%", "host iowait: a weak disk sign")] = 10.0
# contention: the training processes (main and workers) spent this share of the time they
# wanted a core runnable but waiting for one (/proc/PID/schedstat) while the host was
# CPU_SATURATED_PCT busy and this container below that share of its own cores: the host's
# other work takes the CPU. Held until the share falls under CONTENTION_LEAVE_SHARE.
CONTENTION_WAIT_SHARE: Annotated[
    float,
    Doc(
        "share",
        "training processes waiting for a core this share of the time they want one, host "
        "saturated, this container not: `cpu-contention`",
    ),
] = 0.25
CONTENTION_LEAVE_SHARE: Annotated[
    float, Doc("share", "a held `cpu-contention` stays until the wait share falls under this")
] = 0.10
CONTENTION_MIN_WANTED_PCT: Annotated[
    float,
    Doc("% of a core", "training processes wanting less CPU than this: no contention to judge"),
] = 20.0  # less wanted than this (% of one core): too little to judge
# the training step alone keeps this share of the cores busy (its process's CPU outside the
# data-wait): workers would take their CPU from the step, so none is promised a gain
STEP_SATURATED_SHARE: Annotated[
    float,
    Doc("share", "of the cores kept busy by the step alone: the workers fix promises no gain"),
] = 0.9
CPU_QUIET_PCT: Annotated[
    float, Doc("%", "under this, with a quiet disk and no training command: `idle`")
] = 30.0  # below this, with a quiet disk and nothing else to judge by: idle

# --- disk ---
DISK_READING_MB_S: Annotated[
    float, Doc("MB/s", "under this and `DISK_READING_R_S`: the disk is not reading")
] = 0.5  # below this and DISK_READING_R_S the disk is not part of the story
DISK_READING_R_S: Annotated[float, Doc("r/s", "see `DISK_READING_MB_S`")] = 5.0
# the training's processes read under this share of the busiest device's MB/s (their
# /proc/PID/io read_bytes): the device's reads are another program's (an apt-get, a backup on
# the same disk) and no disk rule speaks for the training's data
TRAINING_READ_SHARE: Annotated[
    float,
    Doc(
        "share",
        "the training's processes read under this share of the device's MB/s: the reads are "
        "another program's, no disk rule applies",
    ),
] = 0.25
DISK_BUSY_UTIL_PCT: Annotated[float, Doc("%", "%util: a request in flight half the time")] = (
    50.0  # a request in flight half the time: the reader waits on the device
)
DISK_UTIL_SATURATED_PCT: Annotated[
    float, Doc("%", "%util: a weak disk sign (NVMe/RAID saturate early)")
] = 95.0
DISK_AWAIT_HIGH_MS: Annotated[
    float, Doc("ms", "r_await: the device is the limit (`device-limit`)")
] = 20.0
DISK_QUEUE_DEEP: Annotated[
    float, Doc("aqu-sz", "queue depth said as evidence of `device-limit`")
] = 4.0  # aqu-sz
NEAR_BANDWIDTH: Annotated[
    float, Doc("share", "of the measured sequential bandwidth: the device is the limit")
] = 0.70  # share of the measured sequential bandwidth
LOW_BANDWIDTH: Annotated[
    float,
    Doc(
        "share", "of the measured bandwidth: `small-files` (with a baseline), low-bandwidth warning"
    ),
] = 0.30
SMALL_REQUEST_KB: Annotated[float, Doc("kB", "rareq-sz under this: whole small files")] = (
    100.0  # under this: whole small files (readahead makes large files' 128 kB+)
)
SMALL_FILE_MIN_R_S: Annotated[float, Doc("r/s", "reads per second for `small-files`")] = 50.0
SMALL_READER_QUEUE: Annotated[
    float,
    Doc("aqu-sz per reader", "at most this: one read at a time, latency-bound (`small-files`)"),
] = 1.5  # reads in flight per reader: one at a time, latency-bound
# the waits for each epoch's first batch are this share of all data-wait: restarting the
# workers (persistent_workers=False) is where the loop waits
RESTART_WAIT_SHARE: Annotated[
    float,
    Doc("share", "of the data-wait spent on each epoch's first batch: `persistent_workers` first"),
] = 0.25
# the waits for each epoch's first batch are this share of all data-wait: the epoch's start
# (workers restarted, files or shards listed, a shuffle buffer filled) is the cause
EPOCH_START_SHARE: Annotated[
    float, Doc("share", "of the data-wait spent on each epoch's first batch: `epoch-start`")
] = 0.5
CAP_NEAR_SHARE: Annotated[
    float, Doc("share", "of a cgroup read limit: the cap sets the pace (`cgroup-cap`)")
] = 0.75  # a cgroup reading at this share of its read limit: the cap sets the pace
IO_SHARE_OF_LOADING: Annotated[
    float, Doc("share", "of a reader's loading time with a read in flight: `blocked-on-reads`")
] = 1 / 3  # a reader blocked on reads this much of its loading time
SOME_IO_SHARE: Annotated[
    float,
    Doc("share", "under this (and %util under `DISK_BUSY_UTIL_PCT`) the reads are not the cause"),
] = 0.10  # under this the reads are not where the loading time goes (warm cache)
SHARDS_REQUEST_KB: Annotated[
    float, Doc("kB", "disk-bound with requests under this: the shards fix")
] = 64.0  # disk-bound with requests under this: packing into shards helps
SHORT_QUEUE: Annotated[
    float, Doc("aqu-sz", "disk-bound with a queue under this: the more-workers fix")
] = 1.0  # aqu-sz under this while disk-bound: more workers keep more reads in flight
# a cgroup rate at this share of its limit: `throttled` in the record (collectors/cgroup.py)
THROTTLED_SHARE: Annotated[float, Doc("share", "of a cgroup limit: `throttled` in the record")] = (
    0.9
)

# --- memory ---
DATA_FITS_FRACTION: Annotated[
    float, Doc("share", "dataset at most this share of available memory: it fits (preload)")
] = 0.8  # dataset <= this share of available memory: preloading is an option
SHM_MIN_MB_DEFAULT: Annotated[
    int, Doc("MB", "`/dev/shm` floor, `SHM_MIN_MB` (0: never warn): start-up, banner and verdict")
] = 1024  # Docker's default is 64 MB; DataLoader workers pass batches through it

# --- sustained-condition warnings ---
AWAIT_WARN_MS: Annotated[float, Doc("ms", "max(r_await, w_await) above this ...")] = 50.0
AWAIT_WARN_S: Annotated[float, Doc("s", "... for this long: the await warning")] = 180.0
UTIL_WARN_PCT: Annotated[float, Doc("%", "%util above this ...")] = 95.0
UTIL_WARN_S: Annotated[float, Doc("s", "... for this long: the %util warning")] = 60.0
LOW_BANDWIDTH_WARN_S: Annotated[
    float, Doc("s", "input-bound under `LOW_BANDWIDTH` for this long: the low-bandwidth warning")
] = 60.0

# --- node pressure (`/status`) ---
# analyse/pressure.py: the verdicts' own, so that /status, the verdict and
# the alert rules (monitoring/prometheus/rules.yml: 50 ms, 95%) tell one story
AWAIT_SATURATED_MS: Annotated[float, Doc("ms", "await: saturated")] = AWAIT_WARN_MS  # 50 ms
UTIL_SATURATED: Annotated[float, Doc("%", "%util: saturated")] = DISK_UTIL_SATURATED_PCT  # 95 %
AWAIT_BUSY_MS: Annotated[float, Doc("ms", "await: busy")] = DISK_AWAIT_HIGH_MS  # 20 ms
UTIL_BUSY: Annotated[float, Doc("%", "%util: busy")] = DISK_BUSY_UTIL_PCT  # 50 %
NFS_RTT_SATURATED_MS: Annotated[float, Doc("ms", "NFS round trip: saturated")] = AWAIT_SATURATED_MS
NFS_RTT_BUSY_MS: Annotated[float, Doc("ms", "NFS round trip: busy")] = AWAIT_BUSY_MS
MIN_IOPS: Annotated[
    float, Doc("1/s", "under this many requests per second an await is not judged")
] = 1.0  # below this many requests per second an await is one or two slow requests
STALE_INTERVALS: Annotated[
    float, Doc("intervals", "a record older than this many intervals ...")
] = 3.0  # a record older than this many intervals (and STALE_MIN_S): "unknown"
STALE_MIN_S: Annotated[float, Doc("s", "... and this many seconds: `unknown`")] = 15.0

# --- stability ---
VERDICT_HOLD_DEFAULT: Annotated[
    int,
    Doc(
        "intervals",
        "`DISKINFO_VERDICT_HOLD`: another verdict decided this many times in a row is held",
    ),
] = 3  # intervals another verdict must be decided in a row before it is held
WRAP_HINT_AFTER_S: Annotated[
    float, Doc("s", "a training command without loop figures this long: `not-wrapped`")
] = 60.0  # a training command without loop figures this long: "wrap it"
# the loop's first interval is judged only if the loop ran this share of it (else: starting);
# a loop that began mid-interval leaves the command's start-up reads (torch's import) in it
LOOP_START_COVER: Annotated[
    float, Doc("share", "the loop's first interval is judged only if the loop ran this share of it")
] = 0.9
SUMMARY_INTERVAL_S_DEFAULT: Annotated[
    float, Doc("s", "`DISKINFO_SUMMARY_INTERVAL`: the `[Summary]` line's period")
] = 300.0


def documented() -> list[tuple[str, list[tuple[str, Doc]]]]:
    """(group, [(constant, Doc)]) in this file's order: a group is a `# --- NAME ---` heading,
    a row a constant declared `Annotated[..., Doc(unit, meaning)]` below it. Read from the
    source, so the table cannot say what the declarations do not."""
    import ast  # the docs' table and its test only: the monitor never pays for it

    source = Path(__file__).read_text(encoding="utf-8")
    heads = [
        (number, m.group(1))
        for number, line in enumerate(source.splitlines(), 1)
        if (m := re.fullmatch(r"# --- (.+) ---", line))
    ]
    groups: list[tuple[str, list[tuple[str, Doc]]]] = []
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        meta = getattr(node.annotation, "slice", None)
        call = meta.elts[1] if isinstance(meta, ast.Tuple) and len(meta.elts) == 2 else None
        if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "Doc"):
            continue
        group = [name for line, name in heads if line < node.lineno][-1]
        if not groups or groups[-1][0] != group:
            groups.append((group, []))
        doc = Doc(*(ast.literal_eval(arg) for arg in call.args))
        groups[-1][1].append((node.target.id, doc))
    return groups


def markdown_table() -> str:
    """The thresholds table of docs/verdicts.md, rendered from the declarations."""
    lines = ["| threshold | value | unit | meaning |", "|---|---|---|---|"]
    for group, rows in documented():
        lines.append(f"| **{group}** | | | |")
        for name, doc in rows:
            lines.append(f"| `{name}` | {globals()[name]:.4g} | {doc.unit} | {doc.meaning} |")
    return "\n".join(lines) + "\n"


def env_number(
    name: str, default: float, minimum: float = 0.0, environ: Mapping[str, str] = os.environ
) -> float:
    """A number from the environment; unset, malformed or below `minimum`: the default."""
    try:
        value = float(environ.get(name, ""))
    except ValueError:
        return default
    return value if math.isfinite(value) and value >= minimum else default


def shm_min_mb(environ: Mapping[str, str] = os.environ) -> float:
    """The /dev/shm floor: SHM_MIN_MB, default 1024; 0 turns the check off (unset, malformed
    or negative: the default; the image refuses a malformed one at start)."""
    return env_number("SHM_MIN_MB", SHM_MIN_MB_DEFAULT, 0.0, environ)


def shm_small(size_mb: float, environ: Mapping[str, str] = os.environ) -> bool:
    """The one /dev/shm rule of the start-up check, the banner and the verdict: under the
    floor (never with SHM_MIN_MB=0)."""
    return size_mb < shm_min_mb(environ)


def verdict_hold() -> int:
    return int(env_number("DISKINFO_VERDICT_HOLD", VERDICT_HOLD_DEFAULT, 1.0))


def summary_interval_s() -> float:
    return env_number("DISKINFO_SUMMARY_INTERVAL", SUMMARY_INTERVAL_S_DEFAULT, 1.0)


def shown(value: float, threshold: float, decimals: int = 0) -> str:
    """`value` with as few decimals as keep it on its side of `threshold` once printed."""
    above = value >= threshold
    for d in range(decimals, 4):
        text = f"{value:.{d}f}"
        if (float(text) >= threshold) == above:
            return text
    scale = 1000.0  # still across at 3 decimals: cut towards the value's own side
    cut = math.ceil(value * scale) if above else math.floor(value * scale)
    if (cut / scale >= threshold) != above:
        cut += 1 if above else -1
    return f"{cut / scale:.3f}"


def pct(share: float, threshold: float) -> str:
    """A 0..1 share as a percentage that stays on its side of a 0..1 threshold: "19.8%"."""
    return shown(share * 100, threshold * 100) + "%"


if __name__ == "__main__":  # python -m diskinfo.thresholds: the docs/verdicts.md table
    print(markdown_table(), end="")
