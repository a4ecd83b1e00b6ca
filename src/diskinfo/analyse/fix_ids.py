"""A fix's stable name: the `fix` label of /metrics, what the alert rules quote and the run's
tally counts by, and `Verdict.fix_ids` in the JSONL. Its words (`Verdict.fixes`, fitted to the
interval's figures) are free to change; these values are not (docs/metrics.md lists them)."""

from __future__ import annotations

from enum import Enum


class FixId(str, Enum):
    """One member per fix (analyse/fixes.py), and those given outside the cause table;
    held as record.VerdictName is (3.10 has no StrEnum)."""

    SHM_SIZE = "shm-size"
    RESTARTS = "persistent-workers-restarts"
    PRELOAD = "preload"
    WORKERS = "more-workers"
    WORKERS_SHORT_QUEUE = "more-workers-short-queue"
    PACK = "pack-shards"
    PACK_SMALL_REQUESTS = "pack-shards-small-requests"
    PERSISTENT = "persistent-workers"
    TUNE = "tune"
    CGROUP_CAP = "cgroup-read-limit"
    FASTER_STORAGE = "faster-storage"
    CHEAPER = "cheaper-samples"
    PIN = "pin-memory"
    FASTER_STEP = "faster-step"
    CONTENTION = "cpu-contention"
    WRAP = "wrap-loader"
    EPOCH_START = "cheap-epoch-start"
    JOB_VIEW = "job-view"
    STRAGGLER = "straggler-fix"
    LONGER = "train-longer"

    def __str__(self) -> str:
        return self.value


# the fixes that name a num_workers to reach (the verdict's `workers_target`)
WORKERS_FIXES = frozenset({FixId.WORKERS, FixId.WORKERS_SHORT_QUEUE})

# the fixes no `Fix` in analyse/fixes.py declares, in docs/metrics.md's table of ids
OTHERS = {
    FixId.SHM_SIZE: "a larger /dev/shm (`--shm-size`) where DataLoader workers died in a small one",
    FixId.RESTARTS: "`persistent_workers=True` when starting each epoch's workers is the wait",
    FixId.LONGER: "train for a minute or more: the run ended before an interval was judged",
}
