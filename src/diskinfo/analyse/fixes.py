"""The fixes to try for a verdict, most likely first, fitted to this machine's figures.

A fix names the concrete change with the figures that make it apply ("num_workers 2 -> 4:
2.0 of 16 cores load"); GPU fixes only when the training uses a GPU; what only a
measurement can settle (the best num_workers, prefetch_factor) points to `diskinfo tune`.
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass

from diskinfo import thresholds as t
from diskinfo.analyse.fix_ids import OTHERS, FixId
from diskinfo.analyse.signals import Signals, read_caps
from diskinfo.analyse.workers import workers_fix
from diskinfo.record import Cause, CgroupIO
from diskinfo.units import format_size

SHM_FIX = (
    "DataLoader workers died and /dev/shm is small: start the container with "
    "--shm-size=16g (or --ipc=host)"
)
TUNE_FIX = (
    "measure the best num_workers, prefetch_factor and batch size for this machine: "
    "`diskinfo tune MODULE:FACTORY` (a function that returns your DataLoader)"
)


def mb(value: float) -> str:
    """MiB (the record's MB) in words: "187 MiB", "1.2 GiB"."""
    return format_size(value * 2**20, binary=True)


def cap_words(c: CgroupIO) -> str:
    """The read limit a capped cgroup runs at, in words: "1000 IOPS", "50.0 MB/s"."""
    caps = []
    near = read_caps(c)
    if "read_iops" in near and c.read_iops:
        caps.append(f"{c.read_iops} IOPS")
    if "read_bps" in near and c.read_bps:
        caps.append(f"{c.read_bps / 2**20:.1f} MB/s")
    return " and ".join(caps)


def preload_fix(s: Signals) -> str | None:
    h = s.host
    if not s.fits or h is None or h.dataset_mb is None:
        return None
    return (
        f"the dataset, {mb(h.dataset_mb)}, fits in the {mb(h.mem_available_mb)} of available "
        f"memory (page cache now {mb(h.page_cache_mb)}): preload it once (read every sample "
        "into memory in Dataset.__init__, or copy it to /dev/shm) and read from there"
    )


def _cap_fix(s: Signals) -> str | None:
    c = s.capped
    if c is None:
        return None
    return (
        f"raise or remove this container's cgroup read limit ({cap_words(c)} on {c.device}): "
        "docker run --device-read-iops / --device-read-bps, or the IO limit that Kubernetes' "
        "runtime or systemd sets (IOReadIOPSMax=, IOReadBandwidthMax=; cgroup v2 io.max)"
    )


def restart_fix(s: Signals) -> str | None:
    """persistent_workers=True, with the measured reason, when the loop's data-wait is mostly
    waiting for each epoch's workers to start (short epochs re-fork the workers each time)."""
    loader = s.loader
    if (
        loader is None
        or not loader.num_workers
        or loader.persistent_workers is not False
        or loader.wait_s <= 0
        or loader.start_wait_s < t.RESTART_WAIT_SHARE * loader.wait_s
    ):
        return None
    return (
        f"persistent_workers=True: the DataLoader started its {loader.num_workers} workers "
        f"{loader.epochs} times in this interval (an epoch each time), and waiting for them was "
        f"{loader.start_wait_s / loader.wait_s:.0%} of the data-wait"
    )


def wrap_fix(wrapped_not_iterated: int) -> str:
    """What gets the loop measured: without its figures (and no GPU) nothing can be judged."""
    if wrapped_not_iterated:
        return (
            "wrap the loader the loop iterates instead (with Accelerate, the one prepare "
            "returns: a loader wrapped before prepare is replaced)"
        )
    return (
        "wrap the DataLoader the loop iterates with diskinfo.torch.watch (with Accelerate, the "
        "one prepare returns); the monitor then measures its data-wait"
    )


def longer_fix(interval_s: float) -> str:
    """For a run that ended before any interval could be judged: the interval the loop starts
    in is start-up, and a toy first try would otherwise end on 'unknown 100%' and no word."""
    each = f"{interval_s:.0f}" if interval_s >= 1 else f"{interval_s:.1f}"
    return (
        "train for a minute or more: the interval the loop starts in is start-up, verdicts "
        f"judge the ones after it ({each} s each here)"
    )


def _pin_fix(s: Signals) -> str | None:
    loader = s.loader
    if s.gpu_in_use and (loader is None or loader.pin_memory is not True):
        return "pin_memory=True with .to(device, non_blocking=True) copies"
    return None


def _persistent_fix(s: Signals) -> str | None:
    loader = s.loader
    if (
        loader is not None
        and loader.num_workers
        and loader.persistent_workers is not True
        and restart_fix(s) is None  # that fix says it, with the measured reason
    ):
        return (
            "persistent_workers=True and prefetch_factor=4 (workers survive epochs and read ahead)"
        )
    return None


def _cheaper_fix(s: Signals) -> str:
    if s.gpu_in_use:
        return (
            "make per-sample work cheaper: decode/augment on the GPU (torchvision.transforms.v2 "
            "on tensors, NVIDIA DALI) or cache preprocessed samples"
        )
    return (
        "make per-sample work cheaper: cache preprocessed samples (decode once, store "
        "tensors), or use a cheaper decoder or transform"
    )


def _step_fix(s: Signals) -> str:
    if s.gpu_in_use:
        return (
            "the input pipeline keeps up: speed up the step itself (mixed precision with "
            "torch.autocast, torch.compile, a larger batch)"
        )
    return (
        "the input pipeline keeps up: the step runs on the CPU (no GPU in use), so a "
        "GPU, torch.compile or a smaller model speeds it up"
    )


SHARDS = (
    "pack the small files into large sequential shards: `diskinfo pack SRC DEST` "
    "(WebDataset tar shards)"
)


def _small_requests_shards(s: Signals) -> str | None:
    small = s.disk is not None and 0 < s.disk.rareq_sz < t.SHARDS_REQUEST_KB
    return SHARDS if small else None


def _short_queue_workers(s: Signals) -> str | None:
    short = s.disk is not None and s.disk.aqu_sz < t.SHORT_QUEUE
    return workers_fix(s) if short else None


@dataclass(frozen=True)
class Fix:
    """One fix: its stable id, its words in docs/verdicts.md's cause table, and the text it
    gives for an interval (None: it does not apply to this one)."""

    id: FixId
    doc: str
    text: Callable[[Signals], str | None]


PRELOAD = Fix(FixId.PRELOAD, "preload into RAM if the data fits", preload_fix)
WORKERS = Fix(
    FixId.WORKERS,
    "`num_workers W -> N` (N = 2W, at most the container's cores shared by the ranks; none "
    'when the workers already have every core or every core is busy; "more workers will not '
    'help: the step uses N of M cores" when the step alone keeps '
    f"{t.STEP_SATURATED_SHARE:.0%} of the cores busy)",
    workers_fix,
)
WORKERS_SHORT_QUEUE = Fix(
    FixId.WORKERS_SHORT_QUEUE,
    f"more workers when the queue is short (aqu-sz < {t.SHORT_QUEUE:g})",
    _short_queue_workers,
)
PACK = Fix(FixId.PACK, "pack into shards (`diskinfo pack`, WebDataset tar)", lambda s: SHARDS)
PACK_SMALL_REQUESTS = Fix(
    FixId.PACK_SMALL_REQUESTS,
    f"pack into shards when requests are small (rareq-sz < {t.SHARDS_REQUEST_KB:g} kB)",
    _small_requests_shards,
)
PERSISTENT = Fix(
    FixId.PERSISTENT, "`persistent_workers=True`, `prefetch_factor=4`", _persistent_fix
)
TUNE = Fix(FixId.TUNE, "`diskinfo tune`", lambda s: TUNE_FIX)
CAP = Fix(
    FixId.CGROUP_CAP,
    "raise or remove the container's cgroup read limit when its reads sit at it",
    _cap_fix,
)
FASTER_STORAGE = Fix(
    FixId.FASTER_STORAGE,
    "faster local storage (NVMe, `/dev/shm`) or compressed samples",
    lambda s: "move the data to faster local storage (local NVMe, /dev/shm) or store it compressed",
)
CHEAPER = Fix(
    FixId.CHEAPER,
    "cheaper per-sample work (cached preprocessing; GPU decode/augmentation only with a GPU "
    "in use)",
    _cheaper_fix,
)
PIN = Fix(FixId.PIN, "`pin_memory=True` with `.to(device, non_blocking=True)` (GPU only)", _pin_fix)
FASTER_STEP = Fix(
    FixId.FASTER_STEP,
    "the input pipeline keeps up: with a GPU, mixed precision (`torch.autocast`), "
    "`torch.compile`, a larger batch; without one, the step runs on the CPU",
    _step_fix,
)
CONTENTION = Fix(
    FixId.CONTENTION,
    "CPUs no other work takes (`--cpuset-cpus`, Kubernetes' static CPU manager), a CPU "
    "weight near its use (`--cpu-shares`, a pod's CPU request), the neighbours capped "
    "(`--cpus`), or another node; never more workers",
    lambda s: (
        "give this job CPUs no other work takes: pin it and its neighbours to separate cores "
        "(docker run --cpuset-cpus; Kubernetes: the static CPU manager with a Guaranteed pod), "
        "give it a CPU weight near what it uses (docker run --cpu-shares; Kubernetes: the "
        "pod's CPU request, which sets that weight), cap the neighbours (--cpus), or move the "
        "job to a less loaded node; more DataLoader workers would only queue for the same cores"
    ),
)
JOB_VIEW = Fix(
    FixId.JOB_VIEW,
    "the job's verdict, over every rank: `diskinfo report` over every node's logs, or "
    "`diskinfo watch --job-logs`",
    lambda s: (
        "find the rank that holds the job back before making this one faster: "
        "`diskinfo report` over every node's logs folder (or run each node's monitor with "
        "--job-logs on the job's shared logs folder, or see the job panel in Grafana)"
    ),
)
STRAGGLER = Fix(
    FixId.STRAGGLER, "the straggler's own first fix (its node's verdict)", lambda s: None
)
WRAP = Fix(
    FixId.WRAP,
    "wrap the DataLoader the loop iterates with `diskinfo.torch.watch`",
    lambda s: wrap_fix(s.wrapped_not_iterated),
)

EPOCH_START = Fix(
    FixId.EPOCH_START,
    "start each epoch cheaply: list files or shards once, in the dataset's `__init__`; a "
    "smaller shuffle buffer (it fills before the first sample)",
    lambda s: (
        "start each epoch cheaply: list the files or shards once, in the dataset's __init__ "
        "rather than in __iter__, and keep the shuffle buffer small enough to fill fast "
        "(ShardDataset hands out its first sample after 100; shuffle_buffer= sets the rest)"
    ),
)

_DISK = (CAP, PRELOAD, FASTER_STORAGE, PACK_SMALL_REQUESTS, WORKERS_SHORT_QUEUE, PERSISTENT)
_CPU = (WORKERS, PIN, PERSISTENT, CHEAPER, TUNE)
# The fixes of each cause, most likely first; a cause without fixes has an empty tuple, so a
# new cause must say which fixes it gets (a test checks that every cause is here).
FIXES: dict[Cause, tuple[Fix, ...]] = {
    Cause.EPOCH_START: (PERSISTENT, EPOCH_START),
    Cause.CGROUP_CAP: _DISK,
    Cause.DEVICE_LIMIT: _DISK,
    Cause.BLOCKED_ON_READS: _DISK,
    Cause.DISK_BUSY: _DISK,
    Cause.DISK_READING: _DISK,
    Cause.SMALL_FILES: (PRELOAD, WORKERS, PACK, PERSISTENT, TUNE),
    Cause.CPU_SATURATED: (CHEAPER, PIN, PERSISTENT, TUNE),  # more workers share the same cores
    Cause.NO_WORKERS: _CPU,
    Cause.FEW_WORKERS: _CPU,
    Cause.CPU_UNEXPLAINED: _CPU,
    Cause.CPU_CONTENTION: (CONTENTION, CHEAPER),  # the neighbour's load is the limit
    Cause.STEP: (FASTER_STEP,),
    Cause.JOB_STEP: (JOB_VIEW,),  # never faster compute on one rank's word
    Cause.OTHER_RANK: (STRAGGLER,),  # filled in by analyse/job.in_job
    Cause.NO_STEP: (),
    Cause.GPU_IDLE: (),
    Cause.NO_TRAINING: (),
    Cause.STARTING: (CAP,),  # a start held by the cap: raise it (the start is said)
    Cause.NOT_WRAPPED: (WRAP,),
    Cause.NO_FIGURES: (),
}


def fixes_for(cause: Cause, s: Signals) -> list[tuple[FixId, str]]:
    """(id, words) of each fix that applies, most likely first."""
    fixes = [(fix.id, fix.text(s)) for fix in FIXES[cause]]
    restart = restart_fix(s)
    if restart is not None and cause.verdict.input_bound:
        fixes.insert(
            0, (FixId.RESTARTS, restart)
        )  # measured: the restarts are where the loop waits
    return [(i, f) for i, f in fixes if f]


def markdown_table() -> str:
    """The cause table of docs/verdicts.md, rendered from FIXES (a test keeps them equal);
    neighbouring causes with the same verdict and fixes share a row."""
    lines = ["| cause | verdict | fixes in order |", "|---|---|---|"]
    for (verdict, fixes), causes in itertools.groupby(Cause, lambda c: (c.verdict, FIXES[c])):
        names = ", ".join(f"`{c}`" for c in causes)
        words = "; ".join(fix.doc for fix in fixes) or "none"
        lines.append(f"| {names} | `{verdict}` | {words} |")
    return "\n".join(lines) + "\n"


def fix_ids_table() -> str:
    """docs/metrics.md's table of fix ids, rendered from FixId and each fix's words."""
    words = {f.id: f.doc for f in globals().values() if isinstance(f, Fix)} | OTHERS
    lines = ["| id | the fix |", "|---|---|"]
    lines += [f"| `{fix}` | {words[fix]} |" for fix in FixId]
    return "\n".join(lines) + "\n"


# what monitoring/alertmanager/wecom.tmpl lets through of free text (its text template)
_NOT_WECOM = re.compile(r"[^A-Za-z0-9 _.,:;=%/+()'>?$-]+")


def wecom_fix_words() -> str:
    """wecom.tmpl's `diskinfo.fix`: an alert's `fix` annotation, a fix id, in the words of
    docs/metrics.md's table, kept to what the template lets through of free text; anything
    else (no id, or a forged one) goes through that filter as it is."""
    words = {f.id: f.doc for f in globals().values() if isinstance(f, Fix)} | OTHERS
    out = ['{{ define "diskinfo.fix" }}']
    for i, fix in enumerate(FixId):
        text = words[fix].replace("<", "below").replace('"', "")
        text = " ".join(_NOT_WECOM.sub("", text).split())
        out.append(f'{{{{- {"if" if i == 0 else "else if"} eq . "{fix}" }}}}{text} ({fix})')
    out.append('{{- else }}{{ template "diskinfo.text" . }}{{ end }}{{ end }}')
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # python -m diskinfo.analyse.fixes [ids|wecom]: docs, the template
    which = sys.argv[1:]
    table = fix_ids_table if which == ["ids"] else markdown_table
    print(wecom_fix_words() if which == ["wecom"] else table(), end="")
