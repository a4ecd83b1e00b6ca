"""The command line: options, the run in GPU or CPU-only mode, the exit status."""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from .checks import cpu_checks, gpu_checks
from .common import (
    CPU_CHECKS,
    DEFAULT_REPORT,
    EXIT_FAILED,
    EXIT_NO_GPU,
    EXIT_OK,
    EXIT_USAGE,
    FAULTS,
    GPU_CHECKS,
    PROG,
    UsageError,
    first_line,
)
from .judge import judge_driver, no_gpu_line, resolve_expected_cuda
from .machine import environment, import_torch, read_driver
from .report import Table, build_report, overall_ok, summary_line, write_report


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _number(text: str) -> float:
    """The option's value as a float; NaN (which fails every range check) when it is none."""
    try:
        return float(text)
    except ValueError:
        return math.nan


def fraction_type(text: str) -> float:
    if not 0 < (value := _number(text)) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a fraction between 0 and 1")
    return value


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 64:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 64")
    return int(text)


def positive_float(text: str) -> float:
    if not (value := _number(text)) > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=PROG,
        description="Check the CUDA stack PyTorch sees; a table on stdout, a JSON report, "
        "exit 0 only if every check passed.",
    )
    parser.add_argument("--cpu-only", action="store_true", help="check only the CPU-side parts")
    parser.add_argument(
        "--expect-cuda",
        metavar="VERSION",
        help="CUDA version torch must be built for (default: $EXPECTED_CUDA, $CUDA_VERSION, 11.8)",
    )
    parser.add_argument(
        "--report", metavar="PATH", type=Path, help=f"JSON report path (default {DEFAULT_REPORT})"
    )
    parser.add_argument(
        "--memory-fraction",
        type=fraction_type,
        default=0.9,
        metavar="F",
        help="share of free GPU memory to allocate (default 0.9)",
    )
    parser.add_argument(
        "--matmul-size", type=positive_int, default=8192, metavar="N", help="N of the NxN matmuls"
    )
    parser.add_argument(
        "--timeout",
        type=positive_float,
        default=120.0,
        metavar="S",
        help="seconds allowed for the all-reduce (default 120)",
    )
    parser.add_argument(
        "--inject-fault",
        choices=FAULTS,
        help="break one check on purpose, to see how a failure reads (testing the validator)",
    )
    return parser


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        expected = resolve_expected_cuda(args.expect_cuda, os.environ)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    torch, torch_check = import_torch()
    driver = None if args.cpu_only else read_driver()
    no_driver = driver is not None and driver.version is None and driver.cuda is None
    if torch is not None and no_driver and not torch.cuda.is_available():
        print(no_gpu_line(driver, torch.__version__, torch.version.cuda), file=sys.stderr)
        return EXIT_NO_GPU
    mode = "cpu-only" if args.cpu_only else "gpu"
    table = Table(CPU_CHECKS if args.cpu_only else GPU_CHECKS, sys.stdout)
    header = f"{PROG} ({mode}) on {socket.gethostname()}: {torch_check.detail}"
    expecting = [] if args.cpu_only else [f"expecting CUDA {expected[0]} (from {expected[1]})"]
    table.header([header, *expecting])
    if torch is None:
        results = [torch_check]
        if driver is not None:
            results.append(judge_driver(driver, expected[0], f"expected, from {expected[1]}"))
        for result in results:
            table.row(result)
    elif args.cpu_only:
        results = cpu_checks(torch, torch_check, args, table)
    else:
        assert driver is not None
        results = gpu_checks(torch, torch_check, driver, args, expected, table)
    print(summary_line(results))
    try:
        env = environment(torch, driver)
    except Exception as exc:  # a half-working CUDA must not cost the report
        env = {"error": first_line(exc)}
    report = build_report(mode, expected, env, results)
    print(write_report(report, args.report or DEFAULT_REPORT, args.report is not None), flush=True)
    return EXIT_OK if overall_ok(results) else EXIT_FAILED
