"""The contract between a training process and the monitor: one small JSON file per process.

The training process (through `diskinfo.torch`) rewrites `$DISKINFO_STATE_DIR/loader-<pid>.json`
atomically (write a temporary file, then rename) at most every `PUBLISH_INTERVAL_S` seconds. The
counters are cumulative since the process started and include the phase in progress, so they
never go down while the process lives; the monitor takes deltas and sums them over files.
Readers must ignore keys they do not know; writers may add keys, never rename them.

The state folder is writable by the training's user, and the monitor reads whatever is there:
a file is read only if it is a regular file (no link, no FIFO: `fileio.read_regular`), at most
STATE_CAP bytes, and every field must have its declared type (a string where a count belongs
would otherwise reach diskinfo.log, escape sequences and all): anything else is skipped.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from diskinfo.fileio import read_regular, write_atomic

STATE_DIR_ENV = "DISKINFO_STATE_DIR"
SCHEMA = "diskinfo.loader/1"
PUBLISH_INTERVAL_S = 0.5
FILE_PREFIX = "loader-"
STATE_CAP = 64 * 1024  # bytes: a state is about 300


@dataclass
class LoaderCounters:
    """Cumulative figures of one training process (seconds from a monotonic clock)."""

    pid: int
    batches: int = 0
    wait_s: float = 0.0  # time inside next(iterator): waiting for the next batch
    step_s: float = 0.0  # time between batches: the training step
    worker_errors: int = 0  # DataLoader worker deaths (Bus error, killed by signal, ...)
    updated: float = 0.0  # wall-clock time of this snapshot (Unix seconds)
    num_workers: int | None = None
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    samples: int = 0  # samples in the batches (the batch's leading dimension)
    # iterators started (epochs), and the wait for each one's first batch: a DataLoader
    # without persistent_workers starts its workers again at every epoch
    epochs: int = 0
    start_wait_s: float = 0.0
    # NVML UUIDs of the CUDA devices the process uses (empty until it initialises CUDA): the
    # monitor judges the GPUs the training uses, not the node's most idle one
    gpu_uuids: list[str] = field(default_factory=list)
    # the job this process is one rank of (docs/cluster.md, "The job's verdict"): rank and
    # world size from torch.distributed once initialised, else RANK / WORLD_SIZE / LOCAL_RANK;
    # None outside a distributed job. `job_id` is one id every rank of the job shares
    # ("slurm-<SLURM_JOB_ID>", "elastic-<TORCHELASTIC_RUN_ID>" or "master-<MASTER_ADDR>:<port>"),
    # `node` the node's name as the scheduler knows it (SLURMD_NODENAME, else the host name)
    rank: int | None = None
    world_size: int | None = None
    local_rank: int | None = None
    job_id: str = ""
    node: str = ""


def iterated(c: LoaderCounters) -> bool:
    """Whether the process has iterated a watched loader: `watch` publishes zeros at once,
    the loop's first `next()` starts the wait."""
    return bool(c.batches or c.epochs or c.wait_s > 0 or c.step_s > 0 or c.worker_errors)


def state_dir() -> Path:
    """`$DISKINFO_STATE_DIR` (the image sets /run/diskinfo), else a per-user runtime dir;
    root's is /run/diskinfo, never a name in the shared /tmp that another user could make
    first (a monitor kept root writes there: `privileges`)."""
    env = os.environ.get(STATE_DIR_ENV)
    if env:
        return Path(env)
    if os.getuid() == 0:
        return Path("/run/diskinfo")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "diskinfo"
    return Path(tempfile.gettempdir()) / f"diskinfo-{os.getuid()}"


def encode(counters: LoaderCounters) -> str:
    return json.dumps({"schema": SCHEMA, **asdict(counters)}, separators=(",", ":"))


def decode(text: str) -> LoaderCounters:
    """Parse one state file; ValueError for anything that is not a loader state."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    except RecursionError:  # 60,000 `[` fit in STATE_CAP and nest past the parser's stack
        raise ValueError("not a loader state: nested too deep") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith("diskinfo.loader/"):
        raise ValueError("not a diskinfo loader state")
    names = {f.name for f in fields(LoaderCounters)}
    known = {k: v for k, v in data.items() if k in names}
    if "pid" not in known:
        raise ValueError("bad loader state: no pid")
    for name, value in known.items():
        if not _typed(name, value):
            raise ValueError(f"bad loader state: {name} is not {_KINDS[name]}")
    counters = LoaderCounters(**known)
    for name in _FLOATS:
        setattr(counters, name, float(getattr(counters, name)))
    return counters


_INTS = ("pid", "batches", "samples", "worker_errors", "epochs")
_FLOATS = ("wait_s", "step_s", "updated", "start_wait_s")
_OPTIONAL_INTS = ("num_workers", "prefetch_factor", "rank", "world_size", "local_rank")
_OPTIONAL_BOOLS = ("pin_memory", "persistent_workers")
_TEXT_LISTS = ("gpu_uuids",)
# names that reach the log, /metrics labels and alert text: short, printable, no markup
_NAMES = ("job_id", "node")
NAME_CAP = 128
_NAME_CHARS = re.compile(r"[A-Za-z0-9._:@+-]*")
_KINDS = {
    **dict.fromkeys(_INTS, "a whole number"),
    **dict.fromkeys(_FLOATS, "a finite number"),
    **dict.fromkeys(_OPTIONAL_INTS, "a whole number or null"),
    **dict.fromkeys(_OPTIONAL_BOOLS, "true, false or null"),
    **dict.fromkeys(_TEXT_LISTS, "a list of strings"),
    **dict.fromkeys(_NAMES, f"a name of at most {NAME_CAP} letters, digits and ._:@+-"),
}


def as_name(text: str) -> str:
    """`text` as a valid `job_id` / `node`: other characters become "_", cut to NAME_CAP."""
    return re.sub(r"[^A-Za-z0-9._:@+-]", "_", text)[:NAME_CAP]


def _typed(name: str, value: object) -> bool:
    """Whether a field holds its declared type (bool is no number here, as JSON has it)."""
    if name in _OPTIONAL_BOOLS:
        return value is None or isinstance(value, bool)
    if name in _TEXT_LISTS:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if name in _NAMES:
        return (
            isinstance(value, str) and len(value) <= NAME_CAP and bool(_NAME_CHARS.fullmatch(value))
        )
    if value is None and name in _OPTIONAL_INTS:
        return True
    if isinstance(value, bool):
        return False
    if name in _FLOATS:
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, int)


def state_path(directory: Path, pid: int) -> Path:
    return directory / f"{FILE_PREFIX}{pid}.json"


def write_state(directory: Path, counters: LoaderCounters) -> None:
    """Atomic rewrite: a reader sees the old file or the new one, never half of one."""
    directory.mkdir(parents=True, exist_ok=True)
    write_atomic(state_path(directory, counters.pid), encode(counters))


def read_states(
    directory: Path, cache: dict[str, tuple[tuple[int, int, int], LoaderCounters]] | None = None
) -> dict[int, LoaderCounters]:
    """Every readable state file in `directory`; malformed or vanishing files are skipped.

    With `cache` (kept by the caller between calls), a file whose inode, size and mtime are
    unchanged is not read again: files of finished runs cost one stat per interval, which
    keeps the monitor's per-sample cost flat however many runs have left files behind.
    """
    states: dict[int, LoaderCounters] = {}
    seen: set[str] = set()
    try:
        with os.scandir(directory) as it:
            entries = [e for e in it if e.name.startswith(FILE_PREFIX) and e.name.endswith(".json")]
    except OSError:
        return states
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            hit = cache.get(entry.name) if cache is not None else None
            if hit is not None and hit[0] == key:
                counters = hit[1]
            else:  # a FIFO named loader-1.json must not block the monitor in open()
                counters = decode(read_regular(entry.path, STATE_CAP).decode())
                if cache is not None:
                    cache[entry.name] = (key, counters)
        except (OSError, ValueError, RecursionError):  # one bad file never hides the others
            continue
        seen.add(entry.name)
        states[counters.pid] = counters
    if cache is not None:
        for gone in set(cache) - seen:
            del cache[gone]
    return states


class FolderStamp:
    """Whether the state directory is as it was when last listed, so the listing can be
    skipped. Publishers replace their file by rename, which stamps the directory's mtime; a
    listing stands for the directory only when made SETTLED_NS after that stamp, so a rename
    in the same clock tick as a listing is never missed (file times have the kernel's coarse,
    tick-sized granularity)."""

    SETTLED_NS = 50_000_000

    def __init__(self) -> None:
        self._seen: tuple[Path, int, int] | None = None  # at the last `unchanged`
        self._listed: tuple[Path, int, int] | None = None  # what the last listing stands for

    def unchanged(self, directory: Path) -> bool:
        """True while `directory` is as the last listing saw it: no need to list it again."""
        try:
            st = os.stat(directory)
            self._seen = (directory, st.st_ino, st.st_mtime_ns)
        except OSError:
            self._seen = None
        return self._seen is not None and self._seen == self._listed

    def listing(self) -> None:
        """Called right before the directory is listed (after `unchanged` said False)."""
        settled = self._seen is not None and time.time_ns() - self._seen[2] >= self.SETTLED_NS
        self._listed = self._seen if settled else None


class StateReader:
    """`read_states` for the monitor, every interval: with the per-file cache, and without even
    listing the directory while it has not changed (FolderStamp)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple[int, int, int], LoaderCounters]] = {}
        self._stamp = FolderStamp()
        self._states: dict[int, LoaderCounters] = {}

    def __call__(self, directory: Path) -> dict[int, LoaderCounters]:
        if self._stamp.unchanged(directory):
            return dict(self._states)
        self._stamp.listing()
        self._states = read_states(directory, self._cache)
        return dict(self._states)


def pid_alive(pid: int) -> bool:
    """Signal 0: a process that exists, whoever's it is."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
