"""Argument parsing only: each subcommand hands its parsed arguments to the module that does it.

Implementations are imported lazily so `diskinfo resolve` does not pay for torch or matplotlib.
Any `UserError` (and any OSError from bad input) ends as one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from diskinfo import __version__
from diskinfo.commands import LOG_DIR
from diskinfo.errors import Terminated, UserError, interrupted_exit, printable
from diskinfo.privileges import decide
from diskinfo.shards.format import LABEL_KEY, LABELS
from diskinfo.units import MIB, RULE, size_arg


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments end in one line naming the problem and where help is, not a usage dump."""

    verbs: dict[str, argparse.ArgumentParser]  # the subcommands' parsers (the top level's)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """As argparse, but a word left over is refused by the verb it was given to: its help
        is the one that says what that verb takes."""
        words = list(sys.argv[1:] if args is None else args)
        parsed, extra = self.parse_known_args(words, namespace)
        if extra:
            command = getattr(parsed, "command", None)
            at = words.index(command) if command in words else len(words)
            after = all(word in words[at + 1 :] for word in extra)
            verb = getattr(self, "verbs", {}).get(command, self) if after else self
            verb.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed


def progress_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: only on a terminal)",
    )


def as_root_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--as-root",
        action="store_true",
        help="started as root, stay root instead of becoming NB_USER; every path must then "
        "be one only root can write (also DISKINFO_AS_ROOT=1; see docs/security.md)",
    )


def verb(sub: argparse._SubParsersAction, name: str, summary: str) -> argparse.ArgumentParser:
    """A subcommand whose own --help opens with the line `diskinfo --help` lists it by."""
    return sub.add_parser(name, help=summary, description=summary)


def _handler(module: str, func: str = "run"):
    def call(args: argparse.Namespace) -> int:
        return getattr(importlib.import_module(module), func)(args)

    return call


def build_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="diskinfo",
        description="Is the GPU waiting for data? Disk, GPU and data-loader observability.",
    )
    parser.add_argument("--version", action="version", version=f"diskinfo {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    parser.verbs = sub.choices

    # --- resolve ---
    p = verb(sub, "resolve", "show path -> mount -> device -> physical disks")
    p.add_argument("paths", nargs="+", metavar="PATH", help="a file or directory")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    as_root_flag(p)
    p.set_defaults(func=_handler("diskinfo.commands.resolve"))

    # --- watch ---
    p = verb(sub, "watch", "sample the devices behind PATHs every interval")
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="what the training reads (its data directory)"
    )
    p.add_argument(
        "--interval", type=positive_float, default=5.0, help="seconds (default 5, at most 86400)"
    )
    p.add_argument("--count", type=int, default=None, help="stop after N intervals")
    p.add_argument("--log-dir", default=LOG_DIR, help=f"default {LOG_DIR}")
    p.add_argument(
        "--echo",
        choices=("auto", "always", "never"),
        default="auto",
        help="also print the diskinfo.log lines on stdout (auto: when it is a terminal)",
    )
    p.add_argument(
        "--console",
        choices=("full", "verdicts"),
        default="full",
        help="what goes to stdout: every diskinfo.log line (full), or only the held verdict "
        "on change, a periodic summary and once-only notes (verdicts: for docker logs)",
    )
    p.add_argument(
        "--pid-file",
        default=None,
        help="file holding the training command's PID: its process tree is watched",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        help="serve Prometheus /metrics and /status on this port (0 = off)",
    )
    p.add_argument("--metrics-addr", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    as_root_flag(p)
    p.add_argument(
        "--job-logs",
        default=os.environ.get("DISKINFO_JOB_LOGS") or None,
        metavar="DIR",
        help="a distributed job's shared logs folder, one folder per node's --log-dir: a rank "
        "whose step waits for another rank's data says which (env DISKINFO_JOB_LOGS)",
    )
    p.set_defaults(func=_handler("diskinfo.commands.watch"))

    # --- run ---
    p = verb(sub, "run", "run a command beside the monitor, as you (clusters)")
    p.add_argument(
        "--log-dir",
        default=None,
        help="the logs folder (default: $DISKINFO_LOG_DIR, else ./logs; ./logs/NODE in a "
        "Slurm step)",
    )
    p.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the training command"
    )
    p.set_defaults(func=_handler("diskinfo.commands.run"))

    # --- bench ---
    p = verb(sub, "bench", "measure the device's sequential bandwidth and random IOPS")
    p.add_argument("path", metavar="PATH", help="a directory (a test file is made) or a file")
    p.add_argument(
        "--size",
        type=size_arg(minimum=MIB),
        default="512M",
        help=f"test file size / bytes read from a file (default 512M; {RULE})",
    )
    p.add_argument(
        "--seconds", type=positive_float, default=5.0, help="seconds per test (default 5)"
    )
    p.add_argument("--baseline", default=None, help="store file (default: see docs/report.md)")
    p.add_argument("--no-save", action="store_true", help="measure only, store nothing")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    as_root_flag(p)
    p.set_defaults(func=_handler("diskinfo.commands.bench"))

    # --- report ---
    p = verb(sub, "report", "summarise one run's JSONL, or compare two side by side")
    p.add_argument(
        "runs",
        nargs="+",
        metavar="RUN.jsonl",
        help="a run's diskinfo.jsonl; two (before after) are compared side by side; folders "
        "of logs (each node's, or a job's shared one): the distributed job's verdict per rank",
    )
    p.add_argument(
        "--job", default=None, metavar="ID", help="with folders: which job (default: the latest)"
    )
    p.add_argument(
        "--run",
        default="last",
        metavar="SPEC",
        help="which of the runs a file gathered (each monitor start appends one): 'last' "
        "(default), 'all' (the file as one run), N (from 1), or two to compare side by side, "
        "e.g. 'prev,last' or '1,3'",
    )
    p.add_argument("--png", default=None, help="timeline PNG path (default: next to the JSONL)")
    p.add_argument("--no-png", action="store_true", help="print the summary only")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    as_root_flag(p)
    p.set_defaults(func=_handler("diskinfo.commands.report"))

    # --- status ---
    p = verb(sub, "status", "print the node's storage pressure as JSON")
    p.add_argument(
        "--url",
        default=None,
        help="the monitor's /status (default: http://127.0.0.1:$METRICS_PORT/status, port 9101)",
    )
    p.add_argument("--timeout", type=positive_float, default=3.0, help="seconds (default 3)")
    p.add_argument(
        "--fail-on",
        choices=("busy", "saturated"),
        default=None,
        help="exit 3 when the pressure is at or above this level",
    )
    p.set_defaults(func=_handler("diskinfo.commands.status"))

    # --- pack ---
    p = verb(sub, "pack", "pack a tree of small files into WebDataset tar shards")
    p.add_argument(
        "src",
        metavar="SRC",
        help="class folders (class/x.jpg) or files grouped by stem (x.jpg, x.json)",
    )
    p.add_argument("dest", metavar="DEST", help="the shards and their manifest.json go here")
    count = p.add_mutually_exclusive_group()
    count.add_argument(
        "--readers",
        type=int,
        default=None,
        metavar="N",
        help="ranks x DataLoader workers that will read: 4+ shards each, a multiple of it",
    )
    count.add_argument(
        "--shards",
        type=int,
        default=None,
        metavar="N",
        help="exactly N shards (default: 64, fewer under 1 GiB; see docs/shards.md)",
    )
    count.add_argument(
        "--shard-size",
        type=size_arg(),
        default=None,
        help=f"the fewest shards of at most this size ({RULE})",
    )
    order = p.add_mutually_exclusive_group()
    order.add_argument(
        "--shuffle-seed", type=int, default=0, help="seed of the sample shuffle (default 0)"
    )
    order.add_argument(
        "--no-shuffle", action="store_true", help="keep samples in key order (class by class)"
    )
    p.add_argument(
        "--labels",
        choices=sorted(LABELS),
        default=LABEL_KEY,
        help="where a sample's class goes: key: only its folder in the key, ShardDataset "
        "gives cls from it (default: smaller, faster); member: a .cls member too, as "
        "webdataset's to_tuple(..., 'cls') reads it",
    )
    p.add_argument("--force", action="store_true", help="overwrite a pack already in DEST")
    progress_flag(p)
    as_root_flag(p)
    p.set_defaults(func=_handler("diskinfo.commands.pack"))

    # --- tune: choose DataLoader settings by measurement ---
    p = verb(sub, "tune", "measure DataLoader settings on your dataset, name the best")
    p.add_argument("factory", metavar="MODULE:FACTORY", help="a function returning the Dataset")
    p.add_argument(
        "--budget",
        type=positive_float,
        default=120.0,
        metavar="SECONDS",
        help="seconds in all (default 120)",
    )
    p.add_argument(
        "--batch-size", type=int, default=None, metavar="N", help="default: FACTORY's, else 64"
    )
    p.add_argument("--collate", default=None, metavar="MODULE:FUNCTION", help="collate_fn")
    p.add_argument(
        "--pack",
        default=None,
        metavar="SHARDS",
        help="also try FACTORY(shards=SHARDS): a `diskinfo pack` DEST, or tar shards as "
        "ShardDataset takes them (a path, a {000000..000009} pattern, a glob)",
    )
    p.add_argument(
        "--cold", action="store_true", help="drop the page cache before each setting (root)"
    )
    p.add_argument(
        "--step-ms", type=float, default=0.0, help="simulated training step per batch (default 0)"
    )
    p.add_argument(
        "--step-cpu",
        type=float,
        default=None,
        metavar="CORES",
        help="cores the simulated step keeps busy (as `diskinfo watch` shows the training "
        "process's CPU outside data-wait); caps what workers can gain",
    )
    p.add_argument(
        "--step",
        default=None,
        metavar="MODULE:FUNCTION",
        help="your training step, called with each batch, so its CPU competes as in training",
    )
    p.add_argument(
        "--max-workers", type=int, default=None, metavar="N", help="top rung (default: the cores)"
    )
    p.add_argument(
        "--current",
        default=None,
        help="today's settings, e.g. num_workers=2,prefetch_factor=2 (default: FACTORY's "
        "DataLoader, else PyTorch's defaults)",
    )
    p.add_argument("--exhaustive", action="store_true", help="measure every point of the grid")
    p.add_argument(
        "--out",
        default=None,
        metavar="PREFIX",
        help="writes PREFIX.json and PREFIX.png (default: $LOG_DIR/diskinfo-tune, else ./)",
    )
    progress_flag(p)
    p.set_defaults(func=_handler("diskinfo.commands.tune"))

    return parser


TERMINATING = (signal.SIGTERM, signal.SIGHUP)  # end a verb as Ctrl-C does: its cleanup runs


def _terminate(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def main(argv: Sequence[str] | None = None) -> int:
    """The `diskinfo` program (argv None: the process's own arguments, and the process is
    the command's, so a root run gives up root for good, `privileges`); a caller passing
    `argv` keeps its own identity (tests, notebooks calling the verbs in-process)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    before = {}
    if threading.current_thread() is threading.main_thread():  # `watch` installs its own
        before = {signum: signal.signal(signum, _terminate) for signum in TERMINATING}
    try:
        if argv is None:
            decide(args)  # started as root: become NB_USER, or stay root on root's paths only
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"diskinfo: error: {printable(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        return interrupted_exit(exc)
    except BrokenPipeError:
        # the reader of the output went away (`diskinfo report ... | head`): end quietly with
        # SIGPIPE's status, as coreutils do, and let the exit's own flush find /dev/null
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except OSError as exc:
        print(
            printable(f"diskinfo: error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": ")),
            file=sys.stderr,
        )
        return 1
    finally:
        for signum, handler in before.items():  # main() may run inside a caller's process
            signal.signal(signum, handler)


if __name__ == "__main__":
    sys.exit(main())
