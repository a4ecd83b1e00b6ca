"""A dependency-free progress bar on stderr: redrawn in place on a terminal, else a line
every few seconds (logs keep a trace without a flood). `Bar` is generic (`diskinfo tune`
uses it too); `Progress` is packing's: samples, bytes, rate and time left."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from diskinfo.units import format_size

WIDTH = 30


class Bar:
    def __init__(self, label: str, stream: TextIO, enabled: bool | None = None) -> None:
        """enabled None: only on a terminal."""
        tty = stream.isatty()
        self.label, self.stream = label, stream
        self.enabled = tty if enabled is None else enabled
        self.tty = self.enabled and tty
        self._last = time.monotonic()
        self.drawn = False

    def update(self, share: float, text: str | Callable[[], str], force: bool = False) -> None:
        """Redraw when due (0.1 s on a terminal, 5 s in a log) or when forced. `text` may be
        a function, called only to draw: a pack advances once per file, and making its text
        each time cost more than the rest of the advance (600,000 sizes formatted for
        200,000 files, about a second of a 30-second pack)."""
        if not self.enabled:
            return
        now = time.monotonic()
        if force or now - self._last >= (0.1 if self.tty else 5.0):
            self._last = now
            self.draw(share, text() if callable(text) else text)

    def draw(self, share: float, text: str) -> None:
        share = min(max(share, 0.0), 1.0)
        line = f"{self.label} [{'#' * int(share * WIDTH):<{WIDTH}}] {share:4.0%} {text}"
        self.stream.write(("\r" + line + "\x1b[K") if self.tty else line + "\n")
        self.drawn = True
        self.stream.flush()

    def end(self, complete: bool, share: float = 1.0, text: str = "") -> None:
        """complete=False (an error follows): end the bar's line so the error stands alone."""
        if self.enabled:
            if complete:
                self.draw(share, text)
            if self.tty and (complete or self.drawn):
                self.stream.write("\n")
            self.stream.flush()


class Progress:
    """Packing's bar: samples and bytes done, the write rate and the time left."""

    def __init__(self, samples: int, nbytes: int, stream: TextIO, enabled: bool | None) -> None:
        self.samples, self.nbytes = samples, nbytes
        self.bar = Bar("packing", stream, enabled)
        self.done_samples = self.done_bytes = self.skipped_bytes = 0
        self.start = time.monotonic()

    def advance(self, samples: int, nbytes: int, resumed: bool = False) -> None:
        self.done_samples += samples
        self.done_bytes += nbytes
        if resumed:
            self.skipped_bytes += nbytes
        self.bar.update(self._share(), self._text)

    def finish(self, complete: bool = True) -> None:
        self.bar.end(complete, self._share(), self._text())

    def _share(self) -> float:
        return self.done_bytes / self.nbytes if self.nbytes else 1.0

    def _text(self) -> str:
        rate = (self.done_bytes - self.skipped_bytes) / max(time.monotonic() - self.start, 1e-9)
        left = (self.nbytes - self.done_bytes) / rate if rate > 0 else 0.0
        return (
            f"{self.done_samples}/{self.samples} samples "
            f"{format_size(self.done_bytes)}/{format_size(self.nbytes)} {format_size(rate)}/s "
            f"ETA {int(left) // 60}:{int(left) % 60:02d}"
        )
