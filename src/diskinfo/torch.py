"""Training-loop signal: how long the loop waits for the next batch vs. how long the step takes.

Two lines in a training script::

    import diskinfo.torch
    loader = diskinfo.torch.watch(DataLoader(dataset, batch_size=64, num_workers=8))

Time inside `next()` is data-wait, time between batches is the step: the input share of step
time, as TensorFlow's input-pipeline analyser reports it. The loop itself only reads a clock
twice per batch and swaps one tuple; a daemon thread publishes the cumulative figures to
`$DISKINFO_STATE_DIR/loader-<pid>.json` (see `diskinfo.loader_state`) for the monitor, so the
training loop never writes a file. Works with any iterable; torch is not imported here.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, Generic, TypeVar

from diskinfo import loader_state
from diskinfo import notebook as _notebook
from diskinfo.job_identity import job_identity
from diskinfo.loader_state import LoaderCounters

T = TypeVar("T")
L = TypeVar("L", bound=Iterable[Any])

# Messages of DataLoader worker deaths (a too-small /dev/shm ends in SIGBUS: "Bus error").
WORKER_DEATH_MARKERS = (
    "killed by signal",
    "exited unexpectedly",
    "bus error",
    "shared memory",
    "unable to open shared memory",
)

_WAIT = 1
_STEP = 2


# A worker that dies while handing over a batch breaks the pipe to it instead.
IPC_ERRORS = (ConnectionResetError, ConnectionRefusedError, BrokenPipeError, EOFError)


def is_worker_death(exc: BaseException, multi_worker: bool = False) -> bool:
    if multi_worker and isinstance(exc, IPC_ERRORS):
        return True
    text = str(exc).lower()
    return isinstance(exc, (RuntimeError, OSError)) and any(m in text for m in WORKER_DEATH_MARKERS)


def batch_len(batch: Any) -> int:
    """Samples in a collated batch: the leading dimension of its first tensor or array, through
    the tuples, lists and dicts default_collate builds; a list of strings or numbers counts its
    items; 0 when there is no telling."""
    try:
        for _ in range(4):
            shape = getattr(batch, "shape", None)
            if shape is not None:
                return int(shape[0]) if len(shape) else 0
            if isinstance(batch, dict):
                batch = next(iter(batch.values()), None)
            elif isinstance(batch, (list, tuple)) and batch:
                if isinstance(batch[0], (str, bytes, int, float)):
                    return len(batch)
                batch = batch[0]
            else:
                return 0
    except (TypeError, ValueError, IndexError):  # an odd `shape`: never break the training loop
        pass
    return 0


class _Meter:
    """Process-wide counters; the loop swaps one immutable tuple, the publisher only reads it."""

    def __init__(self, directory: Path, interval: float = loader_state.PUBLISH_INTERVAL_S) -> None:
        self.pid = os.getpid()
        self.directory = directory
        self.interval = interval
        # (batches, wait_s, step_s, worker_errors, phase, phase_start)
        self.state: tuple[int, float, float, int, int, float] = (0, 0.0, 0.0, 0, 0, 0.0)
        # samples in those batches: its own counter, read beside the tuple (a publish between the
        # two reads is one batch behind, and the next publish catches up)
        self.samples = 0
        # epochs started and the wait for their first batches (worker start-up): side
        # counters like `samples`, added once per epoch
        self.epochs = 0
        self.start_wait_s = 0.0
        self.settings: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._broken = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # --- called by the training loop: keep these cheap ---
    def _close(self, then: int = _WAIT) -> None:
        """Count the open phase up to now and open `then`: _WAIT when the loop asks for the
        next batch, 0 when it left the iterator. The one place a phase is closed."""
        now = time.perf_counter()
        b, w, s, e, phase, start = self.state
        if phase == _STEP:
            s += now - start
        elif phase == _WAIT:
            w += now - start
        self.state = (b, w, s, e, then, now)

    begin_wait = _close  # the hot path: the loop's call lands here with no extra call

    def got_batch(self) -> None:
        now = time.perf_counter()
        b, w, s, e, phase, start = self.state
        if phase == _WAIT:
            w += now - start
        self.state = (b + 1, w, s, e, _STEP, now)

    def idle(self) -> None:
        """Close the phase in progress: the loop left the iterator (end of epoch, break)."""
        self._close(0)

    def worker_died(self) -> None:
        b, w, s, e, phase, start = self.state
        self.state = (b, w, s, e + 1, phase, start)
        self.publish()

    # --- publishing (daemon thread, atexit, errors) ---
    def snapshot(self) -> LoaderCounters:
        b, w, s, e, phase, start = self.state
        open_s = time.perf_counter() - start if phase else 0.0
        return LoaderCounters(
            pid=self.pid,
            batches=b,
            samples=self.samples,
            wait_s=w + open_s if phase == _WAIT else w,
            step_s=s + open_s if phase == _STEP else s,
            worker_errors=e,
            updated=time.time(),
            epochs=self.epochs,
            start_wait_s=self.start_wait_s,
            gpu_uuids=cuda_device_uuids(),
            **job_identity(),
            **self.settings,
        )

    def publish(self) -> None:
        if self._broken or os.getpid() != self.pid:
            return
        with self._lock:
            try:
                loader_state.write_state(self.directory, self.snapshot())
            except OSError as exc:
                self._broken = True
                print(
                    f"diskinfo.torch: cannot publish loader figures to {self.directory}: "
                    f"{exc.strerror or exc}; training continues unmeasured",
                    file=sys.stderr,
                )

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="diskinfo-loader", daemon=True)
        self._thread.start()
        atexit.register(self.close)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.publish()

    def close(self) -> None:
        self._stop.set()
        self.publish()


def cuda_device_uuids() -> list[str]:
    """NVML's UUIDs ("GPU-...") of the CUDA devices this process uses (its current device and any
    holding its memory): the monitor judges those GPUs and no others. Read only once the process
    has initialised CUDA itself: initialising it here would put a context on a GPU the training
    may not use and break fork-started DataLoader workers."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return []
        cuda = torch.cuda
        used = {cuda.current_device()} | {
            i for i in range(cuda.device_count()) if cuda.memory_reserved(i) > 0
        }
        uuids = [str(cuda.get_device_properties(i).uuid) for i in sorted(used)]
    except Exception:  # a driver error must never reach the training loop
        return []
    return [u if u.startswith(("GPU-", "MIG-")) else f"GPU-{u}" for u in uuids]


_meter_lock = threading.Lock()
_meter: _Meter | None = None


def meter() -> _Meter:
    """This process's meter (a forked child gets its own, never its parent's)."""
    global _meter
    with _meter_lock:
        if _meter is None or _meter.pid != os.getpid():
            _meter = _Meter(loader_state.state_dir())
        return _meter


def _settings_of(loader: Any) -> dict[str, Any]:
    """DataLoader knobs the verdicts refer to; None for a plain iterable."""
    workers = getattr(loader, "num_workers", None)
    if not isinstance(workers, int):
        return {}
    prefetch = getattr(loader, "prefetch_factor", None)
    return {
        "num_workers": workers,
        "pin_memory": bool(getattr(loader, "pin_memory", False)),
        "persistent_workers": bool(getattr(loader, "persistent_workers", False)),
        "prefetch_factor": prefetch if isinstance(prefetch, int) else None,
    }


def _count_pass(dataset: Any) -> None:
    """A ShardDataset read by workers started afresh each epoch learns of the pass here, in
    the main process (ShardDataset.begin_pass); not imported, there is none to tell."""
    shards = sys.modules.get("diskinfo.shards.dataset")
    if shards is not None and isinstance(dataset, shards.ShardDataset):
        dataset.begin_pass()


def _measured(loader: Any, make_iterator: Callable[[], Iterator[T]]) -> Iterator[T]:
    """One pass over `loader`: the time in each `next()` is data-wait, the rest is the step."""
    m = meter()
    m.begin_wait()  # from here on the loop waits: the publisher's start-up counts as wait too
    m.settings = _settings_of(loader)
    multi_worker = bool(m.settings.get("num_workers"))
    if multi_worker and not m.settings.get("persistent_workers"):
        _count_pass(getattr(loader, "dataset", None))
    m.start()
    shown = _show_pass()
    try:
        started: float | None = time.perf_counter()
        iterator = make_iterator()
        while True:
            try:
                batch = next(iterator)
            except StopIteration:
                return
            except Exception as exc:
                if is_worker_death(exc, multi_worker):
                    m.worker_died()
                raise
            m.got_batch()
            if started is not None:  # the epoch's first batch: iter(), workers' start
                if m.epochs:  # the process's first epoch is the run's warm-up (imports, a cold
                    # cache), paid once: only the starts that recur are the epoch-start cost
                    m.start_wait_s += time.perf_counter() - started
                m.epochs += 1
                started = None
            m.samples += batch_len(batch)
            yield batch
            m.begin_wait()
    finally:
        m.idle()
        if shown is not None:
            shown.pass_ended()


def _show_pass() -> _notebook.VerdictDisplay | None:
    """In a Jupyter kernel, the verdict below the cell that iterates (once per pass); a
    display that fails is no reason to stop the training loop."""
    shown = _notebook.display_for(None)
    if shown is not None:
        try:
            shown.pass_started()
        except Exception:
            return None
    return shown


class WatchedLoader(Generic[T]):
    """Iterates like the wrapped iterable; every other attribute is the wrapped one's. What
    `watch` returns for an iterable that is not a DataLoader (a generator, a custom loader)."""

    def __init__(self, loader: Iterable[T]) -> None:
        self.loader = loader

    def __iter__(self) -> Iterator[T]:
        return _measured(self.loader, partial(iter, self.loader))  # iter(): sequences too

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["loader"], name)


_measured_classes: dict[type, type] = {}


def _measured_class(base: type) -> type:
    """The loader's own class with its passes measured: the loader stays an instance of that
    class, which Lightning and Accelerate test for before they shard the data between ranks
    (handed a wrapper object, they had every rank train on all of it). One per class, named
    as the class it measures; a direct subclass, as `__class__` can only be swapped between
    classes of one layout."""
    with _meter_lock:
        cls = _measured_classes.get(base)
        if cls is None:

            def __iter__(self: Any) -> Iterator[Any]:
                return _measured(self, super(cls, self).__iter__)

            namespace = {name: getattr(base, name) for name in ("__module__", "__qualname__")}
            namespace.update(__iter__=__iter__, __reduce_ex__=_reduce, _diskinfo_base=base)
            cls = _measured_classes[base] = type(base.__name__, (base,), namespace)
        return cls


def _reduce(self: Any, _protocol: Any) -> tuple[Any, ...]:
    """Pickled by its base class, which any process can import (a class made at run time
    cannot be found by name): ddp_spawn and the `spawn` start method pickle the loaders."""
    state = self.__getstate__() if hasattr(self, "__getstate__") else self.__dict__
    return (_unpickle, (type(self)._diskinfo_base,), state)


def _unpickle(base: type) -> Any:
    cls = _measured_class(base)
    return cls.__new__(cls)


def _is_dataloader(obj: object) -> bool:
    data = sys.modules.get("torch.utils.data")  # never imported here: a loop without torch
    return data is not None and isinstance(obj, data.DataLoader)


def watch(loader: L, notebook: bool | None = None) -> L:
    """Wrap a DataLoader (or any iterable) so its data-wait reaches the diskinfo monitor.

    A DataLoader is returned as itself, its class swapped for a measured subclass: it is
    still a DataLoader (and of its own subclass) for frameworks that check, and one that
    rebuilds it from its class to add a DistributedSampler (Lightning) keeps it measured.
    Anything else comes back wrapped in a `WatchedLoader`, which iterates like it and hands
    on every attribute (typed as the loader it wraps, for that reason).

    The process publishes from here on, zeros until a loop iterates: a loader wrapped but
    never iterated (wrapped before a framework builds its own from it) is then told apart
    from one never wrapped, and the monitor says which loader to wrap instead.

    In a Jupyter kernel each cell that iterates shows the monitor's verdict below it
    (diskinfo.notebook); `notebook=False`, or DISKINFO_NOTEBOOK=0 in the environment, turns
    that off, `notebook=True` turns it on against the variable.
    """
    _notebook.display_for(notebook)
    meter().start()
    if "_diskinfo_base" in type(loader).__dict__:
        return loader  # watched already
    if _is_dataloader(loader):
        try:
            loader.__class__ = _measured_class(type(loader))
            return loader
        except (TypeError, AttributeError):  # a layout of its own, or a class that only
            pass  # poses as a DataLoader (Accelerate's prepared loaders): wrap it
    return WatchedLoader(loader)  # type: ignore[return-value]
