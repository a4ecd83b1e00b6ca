"""The monitor's verdict below the notebook cell that trains, updated in place.

`diskinfo.torch.watch` calls `pass_started` when a pass over a watched loader begins and
`pass_ended` when it ends (once per epoch: never per batch). In a Jupyter kernel the first
pass of a cell puts a display under that cell (IPython's `display(..., display_id=True)`);
a daemon thread reads the monitor's verdict file (sinks/verdict_file.py) every POLL_S and
updates the display while the loop runs, and for LINGER_S after it stops so the verdict of
the last intervals still arrives. Outside a kernel (a script, an SSH shell, `docker exec`)
nothing is shown and no thread starts; `DISKINFO_NOTEBOOK=0` or `watch(..., notebook=False)`
turns it off in a kernel too.
"""

from __future__ import annotations

import html
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from diskinfo.sinks import verdict_file

ENV = "DISKINFO_NOTEBOOK"
POLL_S = 2.0  # the monitor decides every 5 s in the image: a fresh verdict shows within 2 s
LINGER_S = 15.0  # after the loop stops: the monitor's next interval or two still report on it
STALE_MIN_S = 20.0


def enabled_by_env(env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    return env.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def kernel_shell() -> Any | None:
    """The IPython shell of a Jupyter kernel, None anywhere else (a terminal IPython has no
    `kernel`; a script has no IPython imported, and it is not imported here)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    try:
        shell = ipython.get_ipython()
    except Exception:
        return None
    return shell if shell is not None and getattr(shell, "kernel", None) is not None else None


def _pct(share: float | None, seconds: float) -> str:
    if share is None:
        return "not measured"
    return f"{share * 100:.0f}% of step time in the last {seconds:.0f} s"


def _held(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


def lines(doc: dict[str, Any] | None, now: float, where: Path) -> list[tuple[str, str]]:
    """(label, text) rows of the display; plain text so the same rows serve HTML and tests."""
    if doc is None:
        return [
            (
                "diskinfo",
                f"waiting for the monitor's first verdict ({where}); in the image it starts "
                "with the container, elsewhere run: diskinfo watch DATA_PATH",
            )
        ]
    age = now - float(doc.get("ts") or 0.0)
    stale = max(STALE_MIN_S, 3 * float(doc.get("interval_s") or 0.0) + 10)
    if age > stale:
        return [("diskinfo", f"no verdict from the monitor for {age:.0f} s (docker logs says why)")]
    verdict = doc.get("verdict")
    rows = [("verdict", f"{verdict} (held {_held(float(doc.get('held_s') or 0))})")]
    # Two moments side by side: the summary is the verdict's, with the figures of the latest
    # interval that decided it; the data-wait is the last interval's. Each row says which, and
    # where the last interval alone decided otherwise (the verdict holds until that persists),
    # the data-wait row says so, so a 15% beside a 9% reads as two intervals, not one.
    alone = doc.get("interval_verdict") or verdict
    if doc.get("summary"):
        why = str(doc["summary"])
        if alone != verdict:
            why += f" (figures of the latest interval judged {verdict})"
        rows.append(("why", why))
    wait = _pct(doc.get("data_wait_share"), float(doc.get("interval_s") or 0.0))
    if alone != verdict:
        wait += f"; that interval alone: {alone}"
    rows.append(("data-wait now", wait))
    cpu = f"training process {doc.get('main_cores', 0):.1f} cores"
    if doc.get("workers"):
        cpu += f", {doc['workers']} workers {doc.get('worker_cores', 0):.1f} cores"
    if doc.get("cores_allowed"):
        cpu += f" (of {doc['cores_allowed']:g})"
    if (doc.get("waiting_cores") or 0) >= 0.1:
        cpu += f", {doc['waiting_cores']:.1f} more waiting for a core"
    if doc.get("batches_s") is not None:
        cpu += f"; {doc['batches_s']:.1f} batches/s"
    rows.append(("cpu", cpu))
    if doc.get("fix"):
        rows.append(("try", str(doc["fix"])))
    return rows


class _Html:
    """What IPython's display machinery shows: text/html, and text/plain for consoles."""

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.rows = rows

    def _repr_html_(self) -> str:
        cells = "".join(
            f"<tr><td style='padding:1px 8px 1px 0;font-weight:bold;vertical-align:top;"
            "white-space:nowrap;text-align:left'>"
            f"{html.escape(k)}</td><td style='padding:1px 0;text-align:left'>{html.escape(v)}"
            "</td></tr>"
            for k, v in self.rows
        )
        return (
            "<div class='diskinfo-verdict' style='font-family:monospace;font-size:12px;"
            "border-left:3px solid #888;padding:2px 8px'><table>" + cells + "</table></div>"
        )

    def __repr__(self) -> str:
        return "\n".join(f"diskinfo {k}: {v}" for k, v in self.rows)


class VerdictDisplay:
    """One per kernel process; a new display per cell that starts a pass."""

    def __init__(self, shell: Any, path: Path | None = None) -> None:
        self.shell = shell
        self.path = path if path is not None else verdict_file.verdict_path()
        self._handle: Any = None
        self._cell: object = None
        self._active = 0
        self._ended = 0.0
        self._shown_loop = False
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def _view(self) -> _Html:
        return _Html(lines(verdict_file.read(self.path), time.time(), self.path))

    def pass_started(self) -> None:
        cell = getattr(self.shell, "execution_count", None)
        if self._handle is None or cell != self._cell:
            from IPython.display import display  # a kernel has IPython imported already

            self._cell = cell
            self._shown_loop = False
            self._handle = display(self._view(), display_id=True)
        self._active += 1
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="diskinfo-notebook", daemon=True)
            self._thread.start()

    def pass_ended(self) -> None:
        self._active = max(0, self._active - 1)
        self._ended = time.monotonic()
        self._wake.set()

    def refresh(self) -> None:
        """Show the latest verdict. Once the loop has stopped, a display that shows a verdict
        on the loop stays as it is: the cell keeps the figures of its training, not those of
        the intervals after it (partly run, then idle); one that has none yet (a loop shorter
        than the monitor's interval) takes the next verdict with loop figures."""
        if self._handle is None or (not self._active and self._shown_loop):
            return
        doc = verdict_file.read(self.path)
        with_loop = doc is not None and doc.get("data_wait_share") is not None
        if not self._active and not with_loop:
            return
        self._handle.update(_Html(lines(doc, time.time(), self.path)))
        self._shown_loop = with_loop

    def _run(self) -> None:
        while True:
            self._wake.wait(POLL_S)
            self._wake.clear()
            if self._active or time.monotonic() - self._ended < LINGER_S:
                try:
                    self.refresh()
                except Exception:  # a closed kernel channel: the loop must go on regardless
                    return


_lock = threading.Lock()
_display: VerdictDisplay | None = None
_decided = False


def display_for(wanted: bool | None) -> VerdictDisplay | None:
    """This kernel's display, None outside a kernel or when turned off (`wanted` False, or
    DISKINFO_NOTEBOOK=0 with `wanted` left None). Decided once per process; an explicit
    `wanted` decides again."""
    global _display, _decided
    with _lock:
        if _decided and wanted is None:
            return _display
        _decided = True
        on = enabled_by_env() if wanted is None else wanted
        shell = kernel_shell() if on else None
        if shell is None:
            _display = None
        elif _display is None:
            _display = VerdictDisplay(shell)
        return _display
