"""`diskinfo report RUN.jsonl [B.jsonl] [--run SPEC]`: print the summary (or A vs B) and write
the PNG. A file holds every run that appended to it: the last one is reported unless --run
picks others."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from diskinfo.errors import UserError
from diskinfo.record import IntervalRecord
from diskinfo.report import (
    load_with_rotated,
    render,
    render_comparison,
    runs_note,
    split_runs,
    summarise,
)
from diskinfo.report.plot import NoMatplotlib, plot
from diskinfo.report.runs import command_label
from diskinfo.sinks.jsonl import MAX_BYTES
from diskinfo.units import format_size


@dataclass
class Picked:
    """One run to report: its records, its name in the report, where it came from."""

    name: str
    records: list[IntervalRecord]
    file: Path
    run: int | None  # 1-based within its file; None: the whole file
    of: int  # runs in its file


BY_NAME = ("last", "all")  # --run values that pick in every file; the others pick by number


def run_name(n: int, records: list[IntervalRecord]) -> str:
    """ "run 3" with its training command beside the number: "run 3: python train.py ..."."""
    command = command_label(records)
    return f"run {n}: {command}" if command else f"run {n}"


def pick(files: list[tuple[Path, list[list[IntervalRecord]]]], spec: str) -> list[Picked]:
    """--run (lower case): `last` (each file's last run), `all` (each file whole), or, in one
    file, a run `N` or two `A,B` to compare (numbers from 1, `prev` and `last` by name).
    `files`: each file with its runs (split_runs)."""
    if spec in BY_NAME:
        out = []
        for path, runs in files:
            if spec == "all":
                name = f"{path} ({len(runs)} runs as one)" if len(runs) > 1 else str(path)
                whole = [rec for one in runs for rec in one]
                out.append(Picked(name, whole, path, None, len(runs)))
            else:
                name = f"{path} ({run_name(len(runs), runs[-1])})" if len(runs) > 1 else str(path)
                out.append(Picked(name, runs[-1], path, len(runs), len(runs)))
        return out
    if len(files) != 1:
        raise UserError(
            f"--run {spec} picks runs of one file; with two files each one's last run is "
            "compared (--run all: each file whole)"
        )
    path, runs = files[0]
    tokens = spec.split(",")
    if len(tokens) > 2:
        raise UserError(f"--run {spec}: one run (N) or two to compare (A,B), not {len(tokens)}")
    numbers = [_run_number(token.strip(), len(runs), path) for token in tokens]
    if len(numbers) == 2 and numbers[0] == numbers[1]:
        raise UserError(f"--run {spec}: the same run twice; name two runs to compare")
    if len(numbers) == 1:
        return [
            Picked(
                f"{path} ({run_name(numbers[0], runs[numbers[0] - 1])})",
                runs[numbers[0] - 1],
                path,
                numbers[0],
                len(runs),
            )
        ]
    return [Picked(run_name(n, runs[n - 1]), runs[n - 1], path, n, len(runs)) for n in numbers]


def _run_number(token: str, count: int, path: Path) -> int:
    held = f"{path} holds {count} run" + ("s" if count != 1 else "")
    if token == "last":
        return count
    if token == "prev":
        if count < 2:
            raise UserError(f"{held}: there is no run before the last")
        return count - 1
    if not token.isdigit():
        raise UserError(f"--run: not a run number, 'prev', 'last' or 'all': {token!r}")
    if not 1 <= int(token) <= count:
        raise UserError(f"{held}: no run {token}")
    return int(token)


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


def default_png(runs: list[Path], picked: list[int] | None = None) -> Path:
    """RUN.png next to RUN.jsonl; A-vs-B.png next to A for a comparison; RUN-runN.png and
    RUN-runA-vs-runB.png for runs that --run picked by number within one file."""
    if picked:
        stem = runs[0].name.removesuffix(".jsonl")
        return runs[0].with_name(f"{stem}-" + "-vs-".join(f"run{n}" for n in picked) + ".png")
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


def _shown(picks: list[Picked]) -> str:
    """Which of a file's runs this report is, for the note on a file with several."""
    if len(picks) == 2:
        return f"runs {picks[0].run} and {picks[1].run} side by side"
    if picks[0].run is None:
        return "every run, as one"
    return f"run {picks[0].run}" + (" (the last)" if picks[0].run == picks[0].of else "")


def _job(folders: list[Path], args: argparse.Namespace) -> int:
    """The job's table per rank and its verdict over time (no PNG: the timeline is the
    spans' lines)."""
    from diskinfo.report import job

    if args.run.strip().lower() != "last":
        raise UserError("--run picks runs of one file; a job's report reads each node's last run")
    report = job.build(folders, getattr(args, "job", None))
    print(json.dumps(report.to_dict(), indent=1) if args.json else job.render(report))
    return 0


def run(args: argparse.Namespace) -> int:
    paths = [Path(p) for p in args.runs]
    if any(p.is_dir() for p in paths):  # every node's logs of a distributed job
        return _job(paths, args)
    if len(paths) > 2:
        raise UserError("give one run to summarise or two (A B) to compare")
    spec = args.run.strip().lower()
    files, rotated = [], {}
    for path in paths:
        records, rotated[path] = load_with_rotated(path)
        files.append((path, split_runs(records)))
    picked = pick(files, spec)
    loaded = [(p.name, p.records) for p in picked]
    summaries = [summarise(records, name) for name, records in loaded]
    numbered = [] if spec in BY_NAME else [p.run or 0 for p in picked]
    png = None if args.no_png else Path(args.png) if args.png else default_png(paths, numbered)
    if args.json:
        written = _timeline(loaded, png, asked=bool(args.png))
        out = {
            "runs": [s.to_dict() for s in summaries],
            "picked": [
                {
                    "file": str(p.file),
                    "run": p.run,
                    "of": p.of,
                    "rotated": list(map(str, rotated[p.file])),
                }
                for p in picked
            ],
            "png": str(written) if written else None,
        }
        print(json.dumps(out, indent=1))
        return 0
    for path, runs in files:
        if rotated[path]:
            print(
                f"{path}: its first run began before the file (it rotates at "
                f"{format_size(MAX_BYTES, binary=True)}); "
                f"read from {', '.join(o.name for o in rotated[path])} too"
            )
        if len(runs) > 1:  # each run's start and length as its summary would state them
            spans = [(s.start, s.duration_s) for s in map(summarise, runs)]
            print(runs_note(str(path), spans, _shown([p for p in picked if p.file == path])))
    print(render(summaries[0]) if len(summaries) == 1 else render_comparison(*summaries))
    sys.stdout.flush()
    written = _timeline(loaded, png, asked=bool(args.png))
    if written is not None:
        print(f"timeline: {written}")
    return 0
