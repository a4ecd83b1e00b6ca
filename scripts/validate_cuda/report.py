"""The table printed as checks finish, the summary line and the JSON report."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import socket
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .common import FAIL, PASS, PROG, SKIP, CheckResult


def format_value(result: CheckResult) -> str:
    if result.value is None:
        return "-"
    text = f"{result.value:.1f}" if isinstance(result.value, float) else str(result.value)
    if len(text) > 24:
        text = text[:21] + "..."
    return f"{text} {result.unit}".strip()


class Table:
    """Rows are printed as each check finishes: the widths are known from the planned names."""

    def __init__(self, names: Sequence[str], out: Any) -> None:
        self.width = max(len(n) for n in names) + 2
        self.out = out

    def header(self, lines: Sequence[str]) -> None:
        for line in lines:
            print(line, file=self.out)
        print(f"{'CHECK':<{self.width}}{'STATUS':<8}{'VALUE':<22}DETAIL", file=self.out, flush=True)

    def row(self, r: CheckResult) -> None:
        line = f"{r.name:<{self.width}}{r.status.upper():<8}{format_value(r):<22}{r.detail}"
        print(line, file=self.out, flush=True)


def summary_line(results: Sequence[CheckResult]) -> str:
    counts = {s: sum(r.status == s for r in results) for s in (PASS, FAIL, SKIP)}
    verdict = "PASS" if overall_ok(results) else "FAIL"
    return (
        f"{PROG}: {verdict}: {len(results)} checks, {counts[PASS]} passed, "
        f"{counts[FAIL]} failed, {counts[SKIP]} skipped"
    )


def overall_ok(results: Sequence[CheckResult]) -> bool:
    return bool(results) and all(r.status == PASS for r in results)


def build_report(
    mode: str,
    expected: tuple[str, str],
    environment: Mapping[str, Any],
    results: Sequence[CheckResult],
) -> dict[str, Any]:
    return {
        "tool": PROG,
        "format": 1,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "mode": mode,
        "expected_cuda": expected[0],
        "expected_cuda_source": expected[1],
        "environment": dict(environment),
        "passed": overall_ok(results),
        "checks": [dataclasses.asdict(r) for r in results],
    }


def write_report(report: Mapping[str, Any], path: Path, explicit: bool) -> str:
    """Write atomically; the line to print either way (an unwritable directory is not fatal)."""
    try:
        if explicit and not path.parent.exists():
            path.parent.mkdir(parents=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(report, indent=2) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        where = f"{path.parent} is not writable ({reason})"
        return f"{PROG}: report not written: {where}; use --report PATH"
    return f"{PROG}: report written to {path}"
