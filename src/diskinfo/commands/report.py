"""`diskinfo report RUN.jsonl [B.jsonl]`: print the summary (or A vs B) and write the PNG."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from diskinfo.errors import UserError
from diskinfo.report import load_run, render, render_comparison, summarise
from diskinfo.report.plot import NoMatplotlib, plot


def run_names(runs: list[Path]) -> list[str]:
    """Short names that tell the runs apart: the file names without .jsonl, or, where those
    are alike (before/diskinfo.jsonl and after/diskinfo.jsonl, as every run's log is called),
    the nearest folder names that differ."""
    names = [p.name.removesuffix(".jsonl") for p in runs]
    if len(set(names)) == len(names):
        return names
    parts = [p.resolve().parent.parts[::-1] for p in runs]  # nearest folder first
    for level in zip(*parts, strict=False):
        if len(set(level)) == len(level):
            return ["root" if name == "/" else name for name in level]
    return names  # the same file twice


def default_png(runs: list[Path]) -> Path:
    """RUN.png next to RUN.jsonl; A-vs-B.png next to A for a comparison."""
    return runs[0].with_name("-vs-".join(run_names(runs)) + ".png")


def _timeline(loaded: list, png: Path | None, asked: bool) -> Path | None:
    """The PNG, or None. Without matplotlib the summary still stands: a note on stderr, unless
    --png asked for the file by name (then a one-line error, after the summary)."""
    if png is None:
        return None
    try:
        return plot(loaded, png)
    except NoMatplotlib as exc:
        if asked:
            raise
        print(f"diskinfo: no timeline PNG: {exc}", file=sys.stderr)
        return None


def run(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.runs]
    if len(paths) > 2:
        raise UserError("give one run to summarise or two (A B) to compare")
    loaded = [(str(p), load_run(p)) for p in paths]
    summaries = [summarise(records, name) for name, records in loaded]
    png = None if args.no_png else Path(args.png) if args.png else default_png(paths)
    if args.json:
        written = _timeline(loaded, png, asked=bool(args.png))
        out = {"runs": [s.to_dict() for s in summaries], "png": str(written) if written else None}
        print(json.dumps(out, indent=1))
        return 0
    print(render(summaries[0]) if len(summaries) == 1 else render_comparison(*summaries))
    sys.stdout.flush()
    written = _timeline(loaded, png, asked=bool(args.png))
    if written is not None:
        print(f"timeline: {written}")
    return 0
