"""diskinfo.log: one human line per device per interval, and the held verdict when it changes.

2026-12-02T13:40:05Z [DiskIO] nvme0n1 /workspace/data: Read=512.30MB/s Write=0.00MB/s
r/s=4098.4 w/s=0.0 r_await=0.41ms w_await=0.00ms aqu-sz=1.68 rareq-sz=128.0kB util=97.3%
2026-12-02T13:40:05Z [Verdict] input-bound: disk: ... | try: ...

The verdict is not repeated every interval: `[Verdict]` when the held verdict or its cause
changes (the cause words the summary and the fix), `[Summary]` every
DISKINFO_SUMMARY_INTERVAL seconds (default 300), `[Note]` once. With
console="verdicts" only those lines (and warnings once each) go to the echo stream, each
saying where the details are: what `docker logs` shows of the image's monitor.
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, TextIO

from diskinfo import logfiles
from diskinfo.record import (
    NO_VERDICT,
    CgroupIO,
    CommandEnd,
    DeviceFigures,
    GpuFigures,
    IntervalRecord,
    NfsFigures,
    Verdict,
)
from diskinfo.rotating_file import RotatingFile
from diskinfo.sinks.jsonl import FILENAME as JSONL
from diskinfo.thresholds import summary_interval_s

if TYPE_CHECKING:  # a type only: the sink writes what the analysis accounted
    from diskinfo.analyse.account import HeldAccount

FILENAME = logfiles.TEXT_LOG


def device_line(fig: DeviceFigures) -> str:
    where = " ".join(fig.paths)
    line = (
        f"[DiskIO] {fig.device}{' ' + where if where else ''}: "
        f"Read={fig.rmb_s:.2f}MB/s Write={fig.wmb_s:.2f}MB/s "
        f"r/s={fig.r_s:.1f} w/s={fig.w_s:.1f} "
        f"r_await={fig.r_await:.2f}ms w_await={fig.w_await:.2f}ms "
        f"aqu-sz={fig.aqu_sz:.2f} rareq-sz={fig.rareq_sz:.1f}kB wareq-sz={fig.wareq_sz:.1f}kB "
        f"util={fig.util:.1f}%"
    )
    if fig.in_flight:
        line += f" in-flight={fig.in_flight}"
    return line


def nfs_line(fig: NfsFigures) -> str:
    mib = 2**20
    return (
        f"[NFS] {fig.server} {fig.mount}: Read={fig.read_bytes_s / mib:.2f}MB/s "
        f"Write={fig.write_bytes_s / mib:.2f}MB/s read/s={fig.read_ops_s:.1f} "
        f"write/s={fig.write_ops_s:.1f} read_rtt={fig.read_rtt_ms:.2f}ms "
        f"write_rtt={fig.write_rtt_ms:.2f}ms retrans={fig.retrans}"
    )


def cgroup_line(fig: CgroupIO) -> str:
    """The container's own I/O on a device and its cgroup limits (none: `-`)."""
    mib = 2**20

    def limit(value: int | None, bytes_: bool) -> str:
        if value is None:
            return "-"
        return f"{value / mib:.2f}MB/s" if bytes_ else f"{value}"

    line = (
        f"[Cgroup] {fig.device}: Read={fig.read_bytes_s / mib:.2f}MB/s "
        f"Write={fig.write_bytes_s / mib:.2f}MB/s r/s={fig.read_ios_s:.1f} "
        f"w/s={fig.write_ios_s:.1f} limits rbps={limit(fig.read_bps, True)} "
        f"wbps={limit(fig.write_bps, True)} riops={limit(fig.read_iops, False)} "
        f"wiops={limit(fig.write_iops, False)}"
    )
    if fig.pressure_some_avg10 is not None:
        line += f" io-pressure some={fig.pressure_some_avg10:.1f}% full="
        line += f"{fig.pressure_full_avg10 or 0:.1f}%"
    if fig.throttled:
        line += f" THROTTLED({','.join(fig.throttled_by)})"
    return line


def gpu_line(g: GpuFigures) -> str:
    """One GPU's figures; a GPU the training does not use says so (it is never judged)."""
    head = f"[GPU] {g.index} {g.name}"
    if g.training is False:
        head += " (unused by the training)"
    if g.state == "lost":
        return f"{head}: lost (fell off the bus), no figures"
    mem = f"mem={g.mem_used_mb:.0f}MB"
    if g.state == "no-utilisation":
        return f"{head}: utilisation not supported (MIG), {mem} power={g.power_w:.0f}W"
    return (
        f"{head}: util mean={g.util_mean:.0f}% min={g.util_min:.0f}% "
        f"idle={g.idle_fraction * 100:.0f}% pulsing={g.pulsing:.2f} {mem} "
        f"pcie rx={g.pcie_rx_mb_s:.0f}MB/s tx={g.pcie_tx_mb_s:.0f}MB/s power={g.power_w:.0f}W"
    )


def evidence_lines(record: IntervalRecord) -> list[str]:
    """GPU, processes and the data loader: per-interval figures behind the verdict."""
    out = [gpu_line(g) for g in record.gpus or []]
    # who reads most, as the line shows it (to 0.01 MB/s); among equals, who uses most CPU:
    # with the data in the page cache or in RAM, the busy process is the one to see
    readers = sorted(
        record.procs, key=lambda p: (-round(p.read_mb_s + p.rchar_mb_s, 2), -p.cpu_percent)
    )[:4]
    if readers:
        out.append(
            "[Procs] "
            + " ".join(
                f"{p.role or 'proc'}:{p.pid} read={p.read_mb_s:.2f}MB/s "
                f"rchar={p.rchar_mb_s:.2f}MB/s cpu={p.cpu_percent:.0f}%"
                for p in readers
            )
            + (f" (+{len(record.procs) - len(readers)} more)" if len(record.procs) > 4 else "")
        )
    ld = record.loader
    if ld is not None and ld.processes:
        out.append(
            f"[Loader] batches/s={ld.batches_s:.1f} data-wait={ld.wait_share * 100:.1f}% of "
            f"step time num_workers={ld.num_workers} worker-errors={ld.worker_errors}"
        )
    v = record.verdict
    if v is not None and v.interval_verdict and v.interval_verdict != v.verdict:
        out.append(
            f"[Interval] decided {v.interval_verdict} ({v.interval_cause}); held {v.verdict}"
        )
    return out


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"


class VerdictLog:
    """The held verdict in words, as the analyser accounts for it (`IntervalRecord.account`):
    on change, as a periodic summary, and once-only notes. Its one choice is the summary's
    period, over which it sums what the accounts state (a verdict without an account, made
    by anything but the Diagnoser, has only its notes and warnings said)."""

    def __init__(self, summary_s: float | None = None) -> None:
        self.summary_s = summary_interval_s() if summary_s is None else summary_s
        # since the last line said: seconds, intervals, those that decided the held verdict,
        # data-wait seconds and the seconds that measured it (sums from zero at each line)
        self.since_summary = 0.0
        self.intervals = self.agreeing = 0
        self.wait_s = self.judged_s = 0.0
        self._latest: HeldAccount | None = None  # for the closing [Run] line
        # records no analyser judged (a monitor without one): their seconds, so that such a
        # run still ends on a [Run] line saying where its report is
        self._unjudged = 0
        self._unjudged_s = 0.0
        # how the training command ended: said by the record after its end
        self._command_end: CommandEnd | None = None

    def lines(self, record: IntervalRecord) -> list[str]:
        """This record's [Verdict], [Summary], [Note] and [warning] lines."""
        if record.command_end is not None:
            self._command_end = record.command_end
        account = record.account
        if account is None:
            self._unjudged += 1
            self._unjudged_s += max(record.elapsed_s, 0.0)
        else:
            self._latest = account
        v = record.verdict
        if v is None:
            return []
        out = []
        if account is not None:
            self.since_summary += record.elapsed_s
            self.intervals += 1
            self.agreeing += account.agrees
            if account.waited_s is not None:
                self.wait_s += account.waited_s
                self.judged_s += record.elapsed_s
            if account.changed:
                out.append(_change(v, account))
                self._reset()
            elif self.since_summary >= self.summary_s:
                out.append(self._summary(v))
                self._reset()
        out += [f"[Note] {n}" for n in v.notes]
        out += [f"[warning] {w}" for w in v.warnings]
        return out

    def _summary(self, v: Verdict) -> str:
        agree = self.agreeing / self.intervals if self.intervals else 0.0
        wait = (
            f", data-wait {self.wait_s / self.judged_s * 100:.0f}% of step time"
            if self.judged_s
            else ""
        )
        return (
            f"[Summary] {v.verdict} for {_minutes(v.held_s)} ({agree * 100:.0f}% of the last "
            f"{self.intervals} intervals decided it{wait}): {v.summary}"
        )

    def _reset(self) -> None:
        self.since_summary = 0.0
        self.intervals = self.agreeing = 0
        self.wait_s = self.judged_s = 0.0

    def closing(self, jsonl: str) -> str | None:
        """The run in one line, for the end of `docker logs`: a run shorter than the summary
        interval otherwise ends on its first verdict, often `unknown` (the loop's start). A
        training command that failed is said instead of a fix: its fault, not its input,
        ended the run (a `pip install` that failed had it propose wrapping the DataLoader)."""
        end = self._command_end
        run = self._latest.run if self._latest is not None else None
        start = ""
        if run is not None:
            total_s, shares, top = run.total_s, list(run.shares().items()), run.top_fix()
            start = f" | {words}" if (words := run.start.words()) else ""
        else:  # nothing judged: the seconds watched, each without a verdict
            total_s, top = self._unjudged_s, None
            shares = [(NO_VERDICT, 1.0 if total_s else 0.0)] if self._unjudged else []
        if total_s <= 0 and end is None:
            return None
        # a share under half a percent (the short interval a stopped monitor writes after the
        # command's end) would read "idle 0%"
        shares = [(v, share) for v, share in shares if share >= 0.005] or shares[:1]
        held = ", ".join(f"{v} {share * 100:.0f}%" for v, share in shares[:3]) or "no interval"
        more = f" (+{len(shares) - 3} more)" if len(shares) > 3 else ""
        fix = f" | first fix to try: {top[1]}" if top else ""
        if end is not None and end.code != 0:
            after = f" after {_minutes(end.ran_s)}" if end.ran_s is not None else ""
            logs = os.path.join(os.path.dirname(jsonl), logfiles.TRAIN_LOG)
            fix = (
                # "above": the command's output comes before this line in docker logs and in
                # `diskinfo run`'s terminal (a Slurm job's output) alike
                f" | the training command failed: exit status {end.code}{after} (its output: "
                f"above, and in {logs})"
            )
        return (
            f"[Run] {_minutes(total_s)} watched: {held}{more}{start}{fix} | a report with a "
            f"timeline: diskinfo report {jsonl}"
        )


def _change(v: Verdict, account: HeldAccount) -> str:
    fix = f" | try: {v.fixes[0]}" if v.fixes else ""
    if account.was is None:
        was = ""
    elif v.verdict != account.was:
        was = f" (was {account.was})"
    else:  # e.g. unknown: from `starting` to `not-wrapped`, which says what to do
        was = f" (cause was {account.was_cause or 'none'})"
    return f"[Verdict] {v.verdict}: {v.summary}{was}{fix}"


def lines(record: IntervalRecord) -> list[str]:
    out = [device_line(f) for f in record.devices]
    out += [nfs_line(f) for f in record.nfs]
    out += [  # quiet devices without limits would add a line of zeros per interval
        cgroup_line(f)
        for f in record.cgroup_io
        if f.read_ios_s or f.write_ios_s or f.read_bps or f.write_bps or f.read_iops or f.write_iops
    ]
    out += evidence_lines(record)
    out += [f"[warning] {w}" for w in record.warnings]
    return out


CONSOLES = ("full", "verdicts")


class TextLogSink:
    def __init__(
        self,
        log_dir: str,
        max_bytes: int = 20 * 2**20,
        backups: int = 5,
        echo: TextIO | None = None,
        console: str = "full",
        summary_s: float | None = None,
    ) -> None:
        if console not in CONSOLES:
            raise ValueError(f"console must be one of {', '.join(CONSOLES)}, got {console!r}")
        self.path = os.path.join(log_dir, FILENAME)
        self._where = os.path.abspath(self.path)  # named in every console line
        self.file = RotatingFile(self.path, max_bytes, backups)
        self.echo = echo  # e.g. sys.stdout; None: file only
        self.console = console
        self.verdicts = VerdictLog(summary_s)
        self._warned: set[str] = set()

    def _console_lines(self, told: list[str], warnings: list[str]) -> list[str]:
        """What `--console verdicts` prints: the verdict lines, and each warning once (numbers
        aside: "await 80 ms ... for 3.2 min" and "... for 3.4 min" are one warning)."""
        out = []
        for line in told + [f"[warning] {w}" for w in warnings]:
            if line.startswith("[warning]"):
                key = re.sub(r"[0-9.]+", "#", line)
                if key in self._warned:
                    continue
                self._warned.add(key)
            out.append(line)
        return [f"{line} (details: {self._where})" for line in out]

    def write(self, record: IntervalRecord) -> None:
        told = self.verdicts.lines(record)
        self._put(record.ts, lines(record) + told, told, record.warnings)

    def _put(self, ts: float, logged: list[str], told: list[str], warnings: list[str]) -> None:
        """`logged` to the file; to the echo stream too, or with console="verdicts" only the
        verdict lines `told` and the `warnings` once each."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))
        text = "".join(f"{stamp} {line}\n" for line in logged)
        if not text:
            return
        self.file.write(text)
        if self.echo is None:
            return
        if self.console == "verdicts":
            text = "".join(f"{stamp} {line}\n" for line in self._console_lines(told, warnings))
        try:
            if text:
                self.echo.write(text)
                self.echo.flush()
        except (OSError, ValueError):
            self.echo = None  # stdout closed: keep logging to the file

    def close(self) -> None:
        line = self.verdicts.closing(os.path.join(os.path.dirname(self._where), JSONL))
        if line is not None:
            self._put(time.time(), [line], [line], [])
        self.file.close()
