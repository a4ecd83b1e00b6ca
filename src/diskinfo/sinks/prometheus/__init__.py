"""Prometheus exporter: /metrics and /status served by the monitor from its latest record.

metrics.py declares every family (SPECS, and docs/metrics.md from it), render.py turns a record
into families at scrape time, exposition.py writes them as text, server.py is the sink with its
HTTP endpoints and httpd.py the bounded server under it. Importing this package costs nothing:
`diskinfo status` needs only DEFAULT_PORT, so the exporter loads when a name below is first
used.
"""

from __future__ import annotations

import importlib
from typing import Any

DEFAULT_PORT = 9101

_HOME = {  # public name -> the module that defines it
    "PrometheusSink": "server",
    "RecordCollector": "render",
    "_Totals": "render",
    "SPECS": "metrics",
    "Spec": "metrics",
    "markdown_table": "metrics",
    "DISK_COUNTERS": "metrics",
    "DISK_GAUGES": "metrics",
    "NFS_COUNTERS": "metrics",
    "NFS_GAUGES": "metrics",
    "CGROUP_COUNTERS": "metrics",
    "CGROUP_GAUGES": "metrics",
    "GPU_GAUGES": "metrics",
    "HOST_GAUGES": "metrics",
    "LOADER_COUNTERS": "metrics",
}
__all__ = ["DEFAULT_PORT", "VERDICTS", *(name for name in _HOME if not name.startswith("_"))]


def __getattr__(name: str) -> Any:
    if name == "VERDICTS":  # the one-hot verdict series; the names live with the record
        from diskinfo.record import VERDICTS

        return VERDICTS
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
