"""Prometheus' text exposition format (0.0.4), written here instead of imported.

prometheus_client's package import pulls in its whole exposition layer (urllib, http.client,
http.server, email, ssl and OpenSSL's libcrypto): about 8 MiB of the monitor's resident memory
for a format that is a few lines of text. The output is byte for byte what
prometheus_client's `generate_latest` writes for the same families (labels sorted by name, its
float spelling); tests/unit/test_prometheus_exposition.py renders both and compares.
"""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Iterable, Sequence

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class Family:
    """One metric family: its samples share the name, type, help and label names."""

    __slots__ = ("help", "kind", "labels", "name", "samples")

    def __init__(self, name: str, kind: str, help: str, labels: Sequence[str] = ()) -> None:
        self.name = name  # as exposed: a counter's ends in _total
        self.kind = kind  # "counter" | "gauge"
        self.help = help
        self.labels = tuple(labels)
        self.samples: list[tuple[tuple[str, ...], float]] = []

    def add(self, values: Sequence[str], value: float) -> None:
        if len(values) != len(self.labels):
            raise ValueError(f"{self.name}: {len(self.labels)} label values, got {len(values)}")
        self.samples.append((tuple(values), float(value)))


def number(value: float) -> str:
    """A sample value as Go spells it (Prometheus' own writer): +Inf, NaN, 1.2e+06."""
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:  # Go switches to an exponent sooner than Python
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def _label_value(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def render(families: Iterable[Family]) -> bytes:
    """The families as one /metrics body."""
    out: list[str] = []
    for fam in families:
        help = fam.help.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {fam.name} {help}\n# TYPE {fam.name} {fam.kind}\n")
        order = sorted(range(len(fam.labels)), key=fam.labels.__getitem__)
        for values, value in fam.samples:
            if values:
                pairs = ",".join(f'{fam.labels[i]}="{_label_value(values[i])}"' for i in order)
                out.append(f"{fam.name}{{{pairs}}} {number(value)}\n")
            else:
                out.append(f"{fam.name} {number(value)}\n")
    return "".join(out).encode()


def _gauge(name: str, help: str, value: float) -> Family:
    fam = Family(name, "gauge", help)
    fam.add((), value)
    return fam


def process_families(proc: str = "/proc/self") -> list[Family]:
    """The monitor's own CPU, memory and descriptors under the names every Prometheus client
    library exports (process_*), so the usual dashboards and alerts find them."""
    families: list[Family] = []
    try:
        with open(f"{proc}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[-1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        families += [
            _gauge(
                "process_virtual_memory_bytes", "Virtual memory size in bytes.", float(fields[20])
            ),
            _gauge(
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                float(fields[21]) * os.sysconf("SC_PAGE_SIZE"),
            ),
            _gauge(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                float(fields[19]) / ticks + _boot_time(),
            ),
        ]
        cpu = Family(
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
        )
        cpu.add((), (float(fields[11]) + float(fields[12])) / ticks)
        families.append(cpu)
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"{proc}/limits", "rb") as limits:
            soft = next(line.split()[3] for line in limits if line.startswith(b"Max open files"))
        families.append(
            _gauge(
                "process_open_fds",
                "Number of open file descriptors.",
                len(os.listdir(f"{proc}/fd")),
            )
        )
        families.append(
            _gauge("process_max_fds", "Maximum number of open file descriptors.", float(soft))
        )
    except (OSError, ValueError, IndexError, StopIteration):
        pass
    return families


@functools.cache
def _boot_time() -> float:
    """The kernel's boot time (btime), read once: it does not change while we run."""
    try:
        with open("/proc/stat", "rb") as stat:
            return float(next(line.split()[1] for line in stat if line.startswith(b"btime ")))
    except (OSError, StopIteration, ValueError):
        return time.time() - time.monotonic()
