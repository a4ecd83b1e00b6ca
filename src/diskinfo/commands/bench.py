"""`diskinfo bench PATH`: the device's sequential bandwidth and random 4 KiB IOPS, stored for the
verdicts under the device's identity. A directory gets a temporary test file (removed
afterwards; one mounted read-only: its largest file is read); a regular file is read as it
is, read-only, so a dataset file can serve without being touched."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from diskinfo.analyse import baseline
from diskinfo.readspeed import measure


def _note(text: str) -> None:
    print(f"diskinfo: {text}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    m = measure(args.path, args.size, args.seconds, note=_note)
    result, seq = m.baseline, m.sequential
    stored = None
    if not args.no_save:
        stored = baseline.save([result], Path(args.baseline) if args.baseline else None)
    if args.json:
        print(json.dumps({**result.to_dict(), "stored": str(stored) if stored else None}))
        return 0
    print(
        f"{result.device} ({args.path}): sequential read {result.seq_read_mb_s:.1f} MB/s "
        f"(1 MiB direct reads, QD1, {seq.seconds:.1f} s); random 4 KiB read "
        f"{result.rand_read_iops:.0f} IOPS ({result.rand_read_lat_ms:.3f} ms each, QD1)"
    )
    if stored:
        print(f"stored in {stored}: verdicts use it as {result.device}'s bandwidth")
        identity = result.identity
        if identity is not None:
            print(
                f"kept for this disk only ({identity.describe()}): another disk named "
                f"{result.device} never uses it"
                + ("" if identity.strong else " (no serial or WWN: known by its slot and size)")
            )
    return 0
