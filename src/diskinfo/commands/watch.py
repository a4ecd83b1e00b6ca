"""`diskinfo watch PATH...`: sample the storage behind the paths every interval.

`build_monitor(args)` resolves the paths once into a `WatchedPaths`, hands it to the
collectors that need it, and wires the analyser and the sinks.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from typing import TextIO

from diskinfo.analyse.baseline import BaselineCache
from diskinfo.analyse.diagnoser import Diagnoser
from diskinfo.collectors.cgroup import CgroupCollector
from diskinfo.collectors.disk import DiskCollector
from diskinfo.collectors.gpu import GpuCollector
from diskinfo.collectors.host import HostCollector
from diskinfo.collectors.loader import LoaderCollector
from diskinfo.collectors.nfs import NfsCollector
from diskinfo.collectors.procs import ProcsCollector
from diskinfo.collectors.watched import WatchedPaths
from diskinfo.complaints import warn
from diskinfo.errors import UserError
from diskinfo.logdir_lock import LogDirLock
from diskinfo.monitor import Collector, Monitor, Sink
from diskinfo.sinks.heartbeat import HeartbeatSink
from diskinfo.sinks.jsonl import JsonlSink
from diskinfo.sinks.textlog import TextLogSink
from diskinfo.sinks.verdict_file import VerdictFileSink
from diskinfo.sources.peer_logs import PeerLogs

MAX_INTERVAL_S = 86400  # a day: longer waits than the clock can take are refused at once


def watched_paths(paths: list[str]) -> WatchedPaths:
    """Every path must exist (UserError, exit 2)."""
    watched = WatchedPaths(paths)
    watched.resolve(strict=True)
    return watched


def say_unmeasurable(watched: WatchedPaths, stream: TextIO | None = None) -> None:
    """What cannot be measured is said once, at start: once for the paths it holds alike
    (/workspace/data and /workspace both on the container's overlay)."""
    paths_of: dict[str, list[str]] = {}
    for res in watched.resolutions:
        if not res.measurable or res.inferred:
            paths_of.setdefault(res.note, []).append(res.path)
    for note, paths in paths_of.items():
        print(f"diskinfo: {', '.join(paths)}: {note}", file=stream or sys.stderr)


def build_monitor(args: argparse.Namespace, held: contextlib.ExitStack) -> Monitor:
    """The monitor `args` describe; the log folder's lock goes into `held`, whose owner
    releases it after the monitor's run (or at once, when building fails)."""
    if args.count is not None and args.count < 1:
        raise UserError(f"--count must be at least 1, got {args.count}")
    if not args.interval > 0:  # cli.positive_float already refuses it; API callers too
        raise UserError(f"--interval must be greater than 0, got {args.interval}")
    if not args.interval <= MAX_INTERVAL_S:  # inf too: a wait that long overflows the clock
        raise UserError(
            f"--interval must be at most {MAX_INTERVAL_S} s (a day), got {args.interval:g}"
        )
    watched = watched_paths(args.paths)
    held.enter_context(LogDirLock(args.log_dir))  # before any output: a second one stops here
    say_unmeasurable(watched)
    collectors: list[Collector] = [DiskCollector(watched)]
    nfs = watched.nfs_mountpoints()
    if nfs:
        collectors.append(NfsCollector(nfs))
    procs = ProcsCollector(args.pid_file, watched=watched.paths)
    collectors += [
        CgroupCollector(watched),  # the container's own I/O on those devices
        HostCollector(watched.paths),
        procs,
        LoaderCollector(),
        GpuCollector(),  # after those two: their PIDs and UUIDs say which GPUs are the training's
    ]

    # --console verdicts is for `docker logs`: a few lines, printed unless --echo never
    to_stdout = args.echo == "always" or (
        args.echo == "auto" and (sys.stdout.isatty() or args.console == "verdicts")
    )
    sinks: list[Sink] = [
        TextLogSink(
            args.log_dir,
            echo=sys.stdout if to_stdout else None,
            console=args.console,
        ),
        JsonlSink(args.log_dir),
        HeartbeatSink(args.interval),
        VerdictFileSink(),  # what a notebook shows below its training cell
    ]
    if args.metrics_port:  # None or 0: off
        # imported here: the exporter and its HTTP server cost start-up time and memory
        # that a monitor without --metrics-port should not pay
        from diskinfo.sinks.prometheus import PrometheusSink
        from diskinfo.sinks.prometheus.server import MetricsUnavailable

        try:
            sinks.append(PrometheusSink(args.metrics_port, args.metrics_addr))
        except MetricsUnavailable as exc:
            # the verdicts and logs are the monitor's job; a port that another container on
            # the host network holds must not stop them (under supervisord: a restart loop)
            warn(
                f"{exc}; monitoring goes on without the metrics endpoint "
                "(another port: --metrics-port; in the image, -e METRICS_PORT=...)"
            )
    peers = PeerLogs(args.job_logs, args.log_dir) if getattr(args, "job_logs", None) else None
    analyser = Diagnoser(BaselineCache(), peers=peers)
    return Monitor(args.interval, collectors, sinks, analyser=analyser, count=args.count)


def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as held:  # the log folder's lock, past the sinks' close
        monitor = build_monitor(args, held)
        monitor.install_signal_handlers()
        print(
            f"diskinfo: watching {', '.join(args.paths)} every {args.interval:g} s; "
            f"logs in {os.path.abspath(args.log_dir)}",
            file=sys.stderr,
            flush=True,
        )
        return monitor.run()
