"""`diskinfo report`: recorded runs (the monitor's JSONL) -> a summary, an A/B comparison and a
PNG timeline. runs: loading; summary: the figures; text: the words; plot: the PNG (matplotlib,
imported only there: `from diskinfo.report.plot import plot`)."""

from diskinfo.report.runs import load_run, load_with_rotated, split_runs
from diskinfo.report.summary import Summary, summarise
from diskinfo.report.text import render, render_comparison, runs_note

__all__ = [
    "Summary",
    "load_run",
    "load_with_rotated",
    "render",
    "render_comparison",
    "runs_note",
    "split_runs",
    "summarise",
]
