"""Loud, not noisy: each kind of write failure is said once on stderr (the image's
`docker logs`), and again only after writing has worked in between."""

from __future__ import annotations

import sys
from typing import TextIO


def warn(text: str, stream: TextIO | None = None) -> None:
    print(f"diskinfo: warning: {text}", file=stream or sys.stderr, flush=True)


class SayOnce:
    """Remembers which failure kinds (strerror texts, exception names) were already said."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def __call__(self, kind: str, text: str, stream: TextIO | None = None) -> None:
        """Say `text` unless `kind` was said since the last reset."""
        if kind not in self._said:
            self._said.add(kind)
            warn(text, stream)

    def reset(self) -> None:
        """Writing works again: the next failure of any kind is news."""
        self._said.clear()


def kind_of(exc: BaseException) -> str:
    """What makes two failures the same kind: the OS error text, else the exception type."""
    strerror = getattr(exc, "strerror", None)
    return strerror or type(exc).__name__
