"""Every threshold of the verdicts and of node pressure, in one place (docs/verdicts.md).

Figures compared with a threshold are printed by `shown`, which never rounds across it:
a 19.76% share is "19.8%", not "20%", where 20% is the line of "highly input-bound".
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

# --- input share (XProf) ---
HIGHLY_INPUT_BOUND = 0.20
MODERATELY_INPUT_BOUND = 0.05
LOOP_ACTIVE_SHARE = 0.10  # loop time (wait + step) per process / interval below this: not running

# --- GPU ---
GPU_IDLE_MEAN_PCT = 5.0  # mean utilisation below this: the GPU does nothing
GPU_BUSY_MEAN_PCT = 70.0
GPU_STARVED_IDLE_FRACTION = 0.25  # share of samples idle
GPU_PULSING = 0.30
GPU_IN_USE_PCT = 1.0  # a GPU whose utilisation never reaches this is not used by training
GPU_SAMPLE_IDLE_PCT = 10.0  # one utilisation sample below this is idle
GPU_SAMPLE_BUSY_PCT = 80.0  # one utilisation sample at or above this is busy

# --- CPU (the container's own cgroup where readable, else the host's) ---
CPU_SATURATED_PCT = 90.0  # percent of the cores the container may use
PROC_SATURATED_PCT = 80.0  # one loader process, percent of one core: it computes, not waits
# a worker that gets this many points of a core less than it wants: the host's other work takes
# the rest (said in the cause's words)
CPU_WAIT_SHOWN_PCT = 5.0
IOWAIT_HIGH_PCT = 10.0
# contention: the training processes (main and workers) spent this share of the time they
# wanted a core runnable but waiting for one (/proc/PID/schedstat) while the host was
# CPU_SATURATED_PCT busy and this container below that share of its own cores: the host's
# other work takes the CPU. Held until the share falls under CONTENTION_LEAVE_SHARE.
CONTENTION_WAIT_SHARE = 0.25
CONTENTION_LEAVE_SHARE = 0.10
CONTENTION_MIN_WANTED_PCT = 20.0  # less wanted than this (% of one core): too little to judge
# the training step alone keeps this share of the cores busy (its process's CPU outside the
# data-wait): workers would take their CPU from the step, so none is promised a gain
STEP_SATURATED_SHARE = 0.9
CPU_QUIET_PCT = 30.0  # below this, with a quiet disk and nothing else to judge by: idle

# --- disk ---
DISK_READING_MB_S = 0.5  # below this and DISK_READING_R_S the disk is not part of the story
DISK_READING_R_S = 5.0
# the training's processes read under this share of the busiest device's MB/s (their
# /proc/PID/io read_bytes): the device's reads are another program's (an apt-get, a backup on
# the same disk) and no disk rule speaks for the training's data
TRAINING_READ_SHARE = 0.25
DISK_BUSY_UTIL_PCT = 50.0  # a request in flight half the time: the reader waits on the device
DISK_UTIL_SATURATED_PCT = 95.0
DISK_AWAIT_HIGH_MS = 20.0
DISK_QUEUE_DEEP = 4.0  # aqu-sz
NEAR_BANDWIDTH = 0.70  # share of the measured sequential bandwidth
LOW_BANDWIDTH = 0.30
SMALL_REQUEST_KB = 100.0  # under this: whole small files (readahead makes large files' 128 kB+)
SMALL_FILE_MIN_R_S = 50.0
SMALL_READER_QUEUE = 1.5  # reads in flight per reader: one at a time, latency-bound
# the waits for each epoch's first batch are this share of all data-wait: restarting the
# workers (persistent_workers=False) is where the loop waits
RESTART_WAIT_SHARE = 0.25
# the waits for each epoch's first batch are this share of all data-wait: the epoch's start
# (workers restarted, files or shards listed, a shuffle buffer filled) is the cause
EPOCH_START_SHARE = 0.5
CAP_NEAR_SHARE = 0.75  # a cgroup reading at this share of its read limit: the cap sets the pace
IO_SHARE_OF_LOADING = 1 / 3  # a reader blocked on reads this much of its loading time
SOME_IO_SHARE = 0.10  # under this the reads are not where the loading time goes (warm cache)
SHARDS_REQUEST_KB = 64.0  # disk-bound with requests under this: packing into shards helps
SHORT_QUEUE = 1.0  # aqu-sz under this while disk-bound: more workers keep more reads in flight
# a cgroup rate at this share of its limit: `throttled` in the record (collectors/cgroup.py)
THROTTLED_SHARE = 0.9

# --- memory ---
DATA_FITS_FRACTION = 0.8  # dataset <= this share of available memory: preloading is an option
SHM_MIN_MB_DEFAULT = 1024  # Docker's default is 64 MB; DataLoader workers pass batches through it

# --- sustained-condition warnings ---
AWAIT_WARN_MS = 50.0
AWAIT_WARN_S = 180.0
UTIL_WARN_PCT = 95.0
UTIL_WARN_S = 60.0
LOW_BANDWIDTH_WARN_S = 60.0

# --- node pressure (analyse/pressure.py): the verdicts' own, so that /status, the verdict and
# the alert rules (monitoring/prometheus/rules.yml: 50 ms, 95%) tell one story ---
AWAIT_SATURATED_MS = AWAIT_WARN_MS  # 50 ms
UTIL_SATURATED = DISK_UTIL_SATURATED_PCT  # 95 %
AWAIT_BUSY_MS = DISK_AWAIT_HIGH_MS  # 20 ms
UTIL_BUSY = DISK_BUSY_UTIL_PCT  # 50 %
NFS_RTT_SATURATED_MS = AWAIT_SATURATED_MS
NFS_RTT_BUSY_MS = AWAIT_BUSY_MS
MIN_IOPS = 1.0  # below this many requests per second an await is one or two slow requests
STALE_INTERVALS = 3.0  # a record older than this many intervals (and STALE_MIN_S): "unknown"
STALE_MIN_S = 15.0

# --- stability ---
VERDICT_HOLD_DEFAULT = 3  # intervals another verdict must be decided in a row before it is held
WRAP_HINT_AFTER_S = 60.0  # a training command without loop figures this long: "wrap it"
# the loop's first interval is judged only if the loop ran this share of it (else: starting);
# a loop that began mid-interval leaves the command's start-up reads (torch's import) in it
LOOP_START_COVER = 0.9
SUMMARY_INTERVAL_S_DEFAULT = 300.0


# The thresholds table of docs/verdicts.md: (group, [(constant, unit, meaning)]), rendered by
# markdown_table; a test checks that every constant above is here and the docs equal it.
DOCUMENTED: tuple[tuple[str, tuple[tuple[str, str, str], ...]], ...] = (
    (
        "input share (XProf)",
        (
            ("HIGHLY_INPUT_BOUND", "share", "data-wait share of step time: highly input-bound"),
            (
                "MODERATELY_INPUT_BOUND",
                "share",
                "moderately input-bound (input-bound only with a starving GPU)",
            ),
            (
                "LOOP_ACTIVE_SHARE",
                "share",
                "loop time per process over the interval under this: the loop is not running",
            ),
        ),
    ),
    (
        "GPU",
        (
            ("GPU_IDLE_MEAN_PCT", "%", "mean utilisation under this: the GPU does nothing"),
            (
                "GPU_BUSY_MEAN_PCT",
                "%",
                "a compute-bound GPU under this: the step's CPU side is the limit",
            ),
            ("GPU_STARVED_IDLE_FRACTION", "share", "share of samples idle: the GPU starves"),
            ("GPU_PULSING", "0..1", "pulsing at or above this: the GPU starves"),
            (
                "GPU_IN_USE_PCT",
                "%",
                "a GPU that never reaches this is not used by training (no GPU fixes)",
            ),
            ("GPU_SAMPLE_IDLE_PCT", "%", "one utilisation sample below this is idle"),
            ("GPU_SAMPLE_BUSY_PCT", "%", "one utilisation sample at or above this is busy"),
        ),
    ),
    (
        "CPU (the container's own where readable)",
        (
            ("CPU_SATURATED_PCT", "%", "of the cores the container may use: `cpu-saturated`"),
            (
                "PROC_SATURATED_PCT",
                "% of a core",
                "a loader process wanting this computes, not waits (`no-workers`, `few-workers`)",
            ),
            (
                "STEP_SATURATED_SHARE",
                "share",
                "of the cores kept busy by the step alone: the workers fix promises no gain",
            ),
            (
                "CPU_WAIT_SHOWN_PCT",
                "% of a core",
                "a worker getting this much less than it wants: the host's work takes the rest",
            ),
            ("IOWAIT_HIGH_PCT", "%", "host iowait: a weak disk sign"),
            (
                "CONTENTION_WAIT_SHARE",
                "share",
                "training processes waiting for a core this share of the time they want one, "
                "host saturated, this container not: `cpu-contention`",
            ),
            (
                "CONTENTION_LEAVE_SHARE",
                "share",
                "a held `cpu-contention` stays until the wait share falls under this",
            ),
            (
                "CONTENTION_MIN_WANTED_PCT",
                "% of a core",
                "training processes wanting less CPU than this: no contention to judge",
            ),
            ("CPU_QUIET_PCT", "%", "under this, with a quiet disk and no training command: `idle`"),
        ),
    ),
    (
        "disk",
        (
            (
                "DISK_READING_MB_S",
                "MB/s",
                "under this and `DISK_READING_R_S`: the disk is not reading",
            ),
            ("DISK_READING_R_S", "r/s", "see `DISK_READING_MB_S`"),
            (
                "TRAINING_READ_SHARE",
                "share",
                "the training's processes read under this share of the device's MB/s: the "
                "reads are another program's, no disk rule applies",
            ),
            ("DISK_BUSY_UTIL_PCT", "%", "%util: a request in flight half the time"),
            ("DISK_UTIL_SATURATED_PCT", "%", "%util: a weak disk sign (NVMe/RAID saturate early)"),
            ("DISK_AWAIT_HIGH_MS", "ms", "r_await: the device is the limit (`device-limit`)"),
            ("DISK_QUEUE_DEEP", "aqu-sz", "queue depth said as evidence of `device-limit`"),
            (
                "NEAR_BANDWIDTH",
                "share",
                "of the measured sequential bandwidth: the device is the limit",
            ),
            (
                "LOW_BANDWIDTH",
                "share",
                "of the measured bandwidth: `small-files` (with a baseline), low-bandwidth warning",
            ),
            ("SMALL_REQUEST_KB", "kB", "rareq-sz under this: whole small files"),
            ("SMALL_FILE_MIN_R_S", "r/s", "reads per second for `small-files`"),
            (
                "SMALL_READER_QUEUE",
                "aqu-sz per reader",
                "at most this: one read at a time, latency-bound (`small-files`)",
            ),
            (
                "RESTART_WAIT_SHARE",
                "share",
                "of the data-wait spent on each epoch's first batch: `persistent_workers` first",
            ),
            (
                "EPOCH_START_SHARE",
                "share",
                "of the data-wait spent on each epoch's first batch: `epoch-start`",
            ),
            (
                "CAP_NEAR_SHARE",
                "share",
                "of a cgroup read limit: the cap sets the pace (`cgroup-cap`)",
            ),
            ("THROTTLED_SHARE", "share", "of a cgroup limit: `throttled` in the record"),
            (
                "IO_SHARE_OF_LOADING",
                "share",
                "of a reader's loading time with a read in flight: `blocked-on-reads`",
            ),
            (
                "SOME_IO_SHARE",
                "share",
                "under this (and %util under `DISK_BUSY_UTIL_PCT`) the reads are not the cause",
            ),
            ("SHARDS_REQUEST_KB", "kB", "disk-bound with requests under this: the shards fix"),
            ("SHORT_QUEUE", "aqu-sz", "disk-bound with a queue under this: the more-workers fix"),
        ),
    ),
    (
        "memory",
        (
            (
                "DATA_FITS_FRACTION",
                "share",
                "dataset at most this share of available memory: it fits (preload)",
            ),
            (
                "SHM_MIN_MB_DEFAULT",
                "MB",
                "`/dev/shm` floor, `SHM_MIN_MB` (0: never warn): start-up, banner and verdict",
            ),
        ),
    ),
    (
        "sustained-condition warnings",
        (
            ("AWAIT_WARN_MS", "ms", "max(r_await, w_await) above this ..."),
            ("AWAIT_WARN_S", "s", "... for this long: the await warning"),
            ("UTIL_WARN_PCT", "%", "%util above this ..."),
            ("UTIL_WARN_S", "s", "... for this long: the %util warning"),
            (
                "LOW_BANDWIDTH_WARN_S",
                "s",
                "input-bound under `LOW_BANDWIDTH` for this long: the low-bandwidth warning",
            ),
        ),
    ),
    (
        "node pressure (`/status`)",
        (
            ("AWAIT_SATURATED_MS", "ms", "await: saturated"),
            ("UTIL_SATURATED", "%", "%util: saturated"),
            ("AWAIT_BUSY_MS", "ms", "await: busy"),
            ("UTIL_BUSY", "%", "%util: busy"),
            ("NFS_RTT_SATURATED_MS", "ms", "NFS round trip: saturated"),
            ("NFS_RTT_BUSY_MS", "ms", "NFS round trip: busy"),
            ("MIN_IOPS", "1/s", "under this many requests per second an await is not judged"),
            ("STALE_INTERVALS", "intervals", "a record older than this many intervals ..."),
            ("STALE_MIN_S", "s", "... and this many seconds: `unknown`"),
        ),
    ),
    (
        "stability",
        (
            (
                "VERDICT_HOLD_DEFAULT",
                "intervals",
                "`DISKINFO_VERDICT_HOLD`: another verdict decided this many times in a row is held",
            ),
            (
                "WRAP_HINT_AFTER_S",
                "s",
                "a training command without loop figures this long: `not-wrapped`",
            ),
            (
                "LOOP_START_COVER",
                "share",
                "the loop's first interval is judged only if the loop ran this share of it",
            ),
            (
                "SUMMARY_INTERVAL_S_DEFAULT",
                "s",
                "`DISKINFO_SUMMARY_INTERVAL`: the `[Summary]` line's period",
            ),
        ),
    ),
)


def markdown_table() -> str:
    """The thresholds table of docs/verdicts.md, rendered from DOCUMENTED."""
    lines = ["| threshold | value | unit | meaning |", "|---|---|---|---|"]
    for group, rows in DOCUMENTED:
        lines.append(f"| **{group}** | | | |")
        for name, unit, meaning in rows:
            lines.append(f"| `{name}` | {globals()[name]:.4g} | {unit} | {meaning} |")
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
