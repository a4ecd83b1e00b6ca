"""The report in words: one run's summary, or two runs side by side with the change."""

from __future__ import annotations

import time

from diskinfo.report.summary import Summary
from diskinfo.units import counted


def _clock(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _num(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}{unit}"


def _throughput(s: Summary) -> str:
    if s.batches_s is None:
        return "no loop figures"
    samples = f", {s.samples_s:,.1f} samples/s" if s.samples_s is not None else ""
    return f"{s.batches_s:,.2f} batches/s{samples} (the training loop ran {_duration(s.loop_s)})"


def ending(s: Summary) -> str | None:
    """How the training command ended, first thing after the run's line: a failed run's
    figures are of the time it ran, and its fault, not its input, ended it."""
    if s.exit_code is None:
        return None
    after = f" after {_duration(s.ran_s)}" if s.ran_s is not None else ""
    if s.exit_code == 0:
        return f"the training command ended well (exit status 0{after})"
    signal = f", killed by signal {s.exit_code - 128}" if 128 < s.exit_code < 160 else ""
    return (
        f"the training command FAILED: exit status {s.exit_code}{signal}{after}; its own "
        "output (train.log) says why; the figures below are of the time it ran"
    )


def render(s: Summary) -> str:
    out = [
        f"run: {s.name}  {_clock(s.start)} -> {_clock(s.end)} UTC "
        f"({_duration(s.duration_s)}, {counted(s.intervals, 'interval')})",
        *([line] if (line := ending(s)) else []),
        "time share of each verdict:",
        *(f"  {share * 100:5.1f}%  {verdict}" for verdict, share in s.verdict_shares.items()),
    ]
    if s.start_words:
        out.append(s.start_words)
    if s.top_fix:
        out.append(f"top fix: {s.top_fix}  (for {s.top_fix_verdict})")
    else:
        out.append("top fix: none suggested")
    out.append(f"throughput: {_throughput(s)}; data-wait share: {_pct(s.wait_share)} of step time")
    if s.disk_read_mb_s is None:
        out.append("disk: no device figures")
    else:
        out.append(
            f"disk: read {_num(s.disk_read_mb_s, ' MB/s')} mean "
            f"(max {_num(s.disk_read_mb_s_max)}), {_num(s.disk_r_s, ' r/s', 0)}, "
            f"{_num(s.disk_rareq_kb, ' kB', 0)} per read, "
            f"r_await {_num(s.disk_r_await_ms, ' ms')}, "
            f"util {_num(s.disk_util, '%', 0)}"
        )
    unused = s.gpus_seen - s.gpus
    out.append(
        f"GPU: {_num(s.gpu_util, '%', 0)} mean utilisation over {s.gpus} GPU(s)"
        + (f" of the training ({unused} more unused, not judged)" if unused > 0 else "")
        if s.gpu_util is not None
        else "GPU: no figures in this run (no GPU or no NVML)"
        if not s.gpus_seen
        else f"GPU: the training used none of the {s.gpus_seen} GPU(s) seen"
    )
    for text, count in sorted(s.warnings.items(), key=lambda kv: -kv[1])[:5]:
        out.append(f"warning ({counted(count, 'interval')}): {text}")
    return "\n".join(out)


def runs_note(path: str, spans: list[tuple[float, float]], shown: str) -> str:
    """What a file with several runs holds (each run's start and length, the last five) and
    how to pick others; `shown` says which this report is."""
    listed = [
        f"{n}: {_clock(start)} UTC, {_duration(seconds)}"
        for n, (start, seconds) in enumerate(spans, 1)
    ][-5:]
    more = "..., " if len(spans) > 5 else ""
    return (
        f"{path} holds {len(spans)} runs ({more}{'; '.join(listed)}); this report: "
        f"{shown}. --run N picks one, --run prev,last puts the last two side by side, "
        "--run all takes the file as one run"
    )


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or a == 0:
        return ""
    return f"x{b / a:.2f}"


def _points(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return ""
    points = round((b - a) * 100)
    return f"{points:+d} pts" if points else "same"  # not "-0 pts" for a change under half


def render_comparison(a: Summary, b: Summary) -> str:
    """Side by side, before (A) and after (B), with the change in the last column."""

    def row(label: str, key: str, show, change) -> tuple[str, str, str, str]:
        va, vb = getattr(a, key), getattr(b, key)
        return (label, show(va), show(vb), change(va, vb))

    def none(_a: object, _b: object) -> str:
        return ""

    rows = [
        ("", f"A: {a.name}", f"B: {b.name}", "B vs A"),
        row("duration", "duration_s", _duration, none),
        row("exit status", "exit_code", lambda v: "-" if v is None else str(v), none),
        row("batches/s", "batches_s", lambda v: _num(v, digits=2), _ratio),
        row("samples/s", "samples_s", _num, _ratio),
        row("data-wait share", "wait_share", _pct, _points),
        row("disk read MB/s", "disk_read_mb_s", _num, _ratio),
        row("disk reads/s", "disk_r_s", lambda v: _num(v, digits=0), _ratio),
        row("kB per read", "disk_rareq_kb", lambda v: _num(v, digits=0), _ratio),
        row("r_await ms", "disk_r_await_ms", _num, none),
        row("disk util", "disk_util", lambda v: _num(v, "%", 0), none),
        row("GPU util", "gpu_util", lambda v: _num(v, "%", 0), none),
    ]
    verdicts = list(dict.fromkeys([*a.verdict_shares, *b.verdict_shares]))
    rows.append(("verdict share of time:", "", "", ""))
    for v in verdicts:
        sa, sb = a.verdict_shares.get(v, 0.0), b.verdict_shares.get(v, 0.0)
        rows.append((f"  {v}", _pct(sa), _pct(sb), _points(sa, sb)))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    lines.append(f"A top fix: {a.top_fix or 'none suggested'}")
    lines.append(f"B top fix: {b.top_fix or 'none suggested'}")
    return "\n".join(lines)
