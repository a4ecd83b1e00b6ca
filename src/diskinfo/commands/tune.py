"""`diskinfo tune MODULE:FACTORY`: measure DataLoader settings, print the table, write the
JSON and the PNG, name the best setting."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from diskinfo import logfiles
from diskinfo.commands import LOG_DIR
from diskinfo.shards.pack.progress import Bar
from diskinfo.tune import Options, mix, tune
from diskinfo.tune.table import caveat, plot, render, verdict, write_json


def step_words(opts: Options, step_cores: float) -> str:
    if opts.step:
        return f"{opts.step} on every batch ({step_cores:.1f} cores under the current setting)"
    if opts.step_ms:
        cpu = f"{opts.step_cpu:g} cores" if opts.step_cpu is not None else "no CPU (--step-cpu)"
        return f"simulated, {opts.step_ms:g} ms per batch at {cpu}"
    return "none (the loader alone)"


def run(args: argparse.Namespace) -> int:
    opts = Options(
        factory=args.factory,
        budget=args.budget,
        batch_size=args.batch_size,
        collate=args.collate,
        pack=args.pack,
        cold=args.cold,
        step_ms=args.step_ms,
        step=args.step,
        step_cpu=args.step_cpu,
        max_workers=args.max_workers,
        current=args.current,
        exhaustive=args.exhaustive,
    )
    bar = Bar("tuning", sys.stderr, args.progress)
    try:
        outcome = tune(opts, lambda share, text: bar.update(share, text, force=True))
    except BaseException:
        bar.end(complete=False)
        raise
    bar.end(True, 1.0, "done")
    prefix = Path(args.out or os.path.join(os.environ.get("LOG_DIR", "."), logfiles.TUNE))
    document = outcome.document()
    write_json(prefix.with_suffix(".json"), document)
    title = f"diskinfo tune {document['factory']}: {document['cache']}, batch {outcome.batch_size}"
    png = prefix.with_suffix(".png")
    drew = plot(png, outcome.results, outcome.current, outcome.chosen, outcome.epoch, title)
    print(f"{document['factory']}: batch {outcome.batch_size}, {document['search']} search, "
          f"{document['spent_s']:.0f} s of a {opts.budget:.0f} s budget; cache: "
          f"{document['cache']}; step: {step_words(opts, outcome.step_cores)}")  # fmt: skip
    for p in outcome.first_passes:
        what = "shards" if p["shards"] else "dataset"
        done = "complete" if p["complete"] else "cut short by the budget"
        print(f"first pass over the {what}: {p['samples']:,} samples in {p['seconds']} s ({done})")
    print(render(outcome.results, outcome.current, outcome.chosen, outcome.epoch))
    for line in verdict(outcome.chosen, outcome.current, outcome.epoch, outcome.batch_size,
                        outcome.saturated):  # fmt: skip
        print(line)
    if said := mix.words("the pick", outcome.chosen.mix):
        print(said)
    for line in caveat(outcome.results, outcome.chosen, outcome.epoch, opts.budget):
        print(line)
    print(f"written: {prefix.with_suffix('.json')}" + (f", {png}" if drew else " (no PNG: "
          "matplotlib is not installed)"))  # fmt: skip
    logs = os.environ.get("LOG_DIR") or LOG_DIR  # where the monitor's runs are
    print("then train once before and once after the change, into the same logs folder, and "
          f"compare the two runs: `diskinfo report {logs}/diskinfo.jsonl --run prev,last` "
          "(see docs/tune.md)")  # fmt: skip
    return 0
