"""Collectors: each reads one source and fills its part of an IntervalRecord.

They follow diskinfo.monitor.Collector: `start()` takes the baseline, `fill(record)` the
interval's figures, `stop()` releases. Bad data becomes a warning in `record.warnings`.
`BaseCollector` gives the no-op start/stop and `Notes`, the one way to say a warning once or to
hold one back (from start() or a thread) until the next record.
"""

from __future__ import annotations

from diskinfo.record import IntervalRecord


class Notes:
    """Warnings waiting for the next record; `once` drops a text already said in this run."""

    def __init__(self) -> None:
        self._said: set[str] = set()
        self._pending: list[str] = []

    def once(self, text: str) -> None:
        """A missing or unreadable file, a refused setting: said once, not every interval."""
        if text not in self._said:
            self._said.add(text)
            self._pending.append(text)

    def later(self, text: str) -> None:
        """Said with the next record, every time it happens."""
        self._pending.append(text)

    def flush(self, record: IntervalRecord) -> None:
        if self._pending:
            record.warnings.extend(self._pending)
            self._pending.clear()


class BaseCollector:
    """Base of the collectors: nothing to start or stop unless a collector says otherwise."""

    def __init__(self) -> None:
        self.notes = Notes()

    def start(self) -> None:
        pass

    def fill(self, record: IntervalRecord) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        pass

    def unsaid(self) -> bool:
        return False
