"""Summaries of recorded runs: where the time went, the fix to try first, and a PNG timeline.

Input is the monitor's JSONL (one `IntervalRecord.to_dict()` per line). Every share is
weighted by the intervals' measured length, so a run recorded at a mixed interval still adds
up. The disk figures are those of the busiest watched device per interval (the device the
verdicts look at), not a sum: stacked devices (dm over its disk) would count twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diskinfo.errors import UserError
from diskinfo.record import DeviceFigures, IntervalRecord, Verdict

NO_VERDICT = "no verdict"
COLOURS = {
    "input-bound: disk": "#d62728",
    "input-bound: cpu": "#ff7f0e",
    "input-bound: small-file random reads": "#9467bd",
    "compute-bound": "#2ca02c",
    "idle": "#bbbbbb",
    "unknown": "#7f7f7f",
    NO_VERDICT: "#eeeeee",
}


def load_run(path: str | Path) -> list[IntervalRecord]:
    """Records of one JSONL file; a one-line UserError for a missing, empty or bad file.
    A last line without its newline is a write in progress (the monitor still runs): skipped."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path} is not a JSONL file (not text)") from None
    lines = text.split("\n")
    partial = lines.pop() if lines else ""  # text after the last newline
    records = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            records.append(_parse(path, number, line))
    if partial.strip():
        with contextlib.suppress(UserError):
            records.append(_parse(path, len(lines) + 1, partial))
    if not records:
        raise UserError(f"{path} holds no interval records (empty run)")
    return records


def _parse(path: Path, number: int, line: str) -> IntervalRecord:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise UserError(f"{path} line {number}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not str(data.get("schema", "")).startswith(
        "diskinfo.interval/"
    ):
        raise UserError(f"{path} line {number}: not a diskinfo interval record")
    try:
        record = IntervalRecord.from_dict(data)
        _check_numbers(record)
    except (TypeError, ValueError, AttributeError) as exc:
        raise UserError(f"{path} line {number}: malformed interval record ({exc})") from None
    return record


def _check_numbers(obj: Any) -> None:
    """Every field whose default is a number must hold a finite number (null, which the JSONL
    sink writes for NaN, becomes the default): the summary does arithmetic on them, and a
    string there would end in a traceback instead of this one-line error."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(f.default, (int, float)) and not isinstance(f.default, bool):
            if value is None:  # the JSONL sink writes NaN as null: not measured
                setattr(obj, f.name, value := f.default)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"{type(obj).__name__}.{f.name} is not a number: {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"{type(obj).__name__}.{f.name} is not finite: {value!r}")
        children = value if isinstance(value, list) else [value]
        for child in children:
            if dataclasses.is_dataclass(child):
                _check_numbers(child)
    if isinstance(obj, Verdict) and not (
        isinstance(obj.verdict, str)
        and isinstance(obj.fixes, list)
        and all(isinstance(x, str) for x in [*obj.fixes, *obj.warnings])
    ):
        raise ValueError(f"verdict is not text with a list of fixes: {obj.verdict!r}")
    if isinstance(obj, IntervalRecord):
        if not isinstance(obj.ts, (int, float)) or not math.isfinite(obj.ts):
            raise ValueError(f"ts is not a time: {obj.ts!r}")
        if not isinstance(obj.elapsed_s, (int, float)) or not obj.elapsed_s >= 0:
            raise ValueError(f"elapsed_s is not a duration: {obj.elapsed_s!r}")


def disk_of(record: IntervalRecord) -> DeviceFigures | None:
    """The busiest watched device of the interval (all devices if none is marked watched)."""
    watched = [d for d in record.devices if d.paths] or record.devices
    return max(watched, key=lambda d: (d.rmb_s, d.r_s)) if watched else None


def gpu_util(record: IntervalRecord) -> float | None:
    if not record.gpus:
        return None
    return sum(g.util_mean for g in record.gpus) / len(record.gpus)


def wait_share(record: IntervalRecord) -> float | None:
    loader = record.loader
    if loader is None or loader.wait_s + loader.step_s <= 0:
        return None
    return loader.wait_s / (loader.wait_s + loader.step_s)


def verdict_of(record: IntervalRecord) -> str:
    return record.verdict.verdict if record.verdict is not None else NO_VERDICT


@dataclass
class Summary:
    name: str
    start: float
    end: float
    duration_s: float
    intervals: int
    verdict_shares: dict[str, float]  # share of recorded time, largest first
    top_fix: str | None
    top_fix_verdict: str | None
    batches_s: float | None  # loader batches per second of instrumented time
    wait_share: float | None  # sum(wait) / sum(wait + step)
    disk_read_mb_s: float | None  # time-weighted mean
    disk_read_mb_s_max: float | None
    disk_r_s: float | None
    disk_rareq_kb: float | None  # bytes read / reads: the mean request size
    disk_r_await_ms: float | None  # read-weighted, as iostat over the whole run
    disk_util: float | None
    gpu_util: float | None
    gpus: int
    warnings: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _weighted(pairs: list[tuple[float, float]]) -> float | None:
    weight = sum(w for w, _ in pairs)
    return sum(w * v for w, v in pairs) / weight if weight > 0 else None


def summarise(records: Sequence[IntervalRecord], name: str = "") -> Summary:
    total = sum(max(r.elapsed_s, 0.0) for r in records)
    by_verdict: dict[str, float] = defaultdict(float)
    fixes: dict[tuple[str, str], float] = defaultdict(float)
    for r in records:
        by_verdict[verdict_of(r)] += r.elapsed_s
        if r.verdict is not None and r.verdict.fixes:
            fixes[(r.verdict.verdict, r.verdict.fixes[0])] += r.elapsed_s
    shares = {
        v: t / total if total else 0.0
        for v, t in sorted(by_verdict.items(), key=lambda kv: (-kv[1], kv[0]))
    }
    input_fixes = {k: t for k, t in fixes.items() if k[0].startswith("input-bound")}
    pool = input_fixes or fixes
    top = max(pool, key=lambda k: (pool[k], k)) if pool else None

    loaders = [r for r in records if r.loader is not None]
    loop_s = sum(r.elapsed_s for r in loaders)
    wait = sum(r.loader.wait_s for r in loaders)  # type: ignore[union-attr]
    step = sum(r.loader.step_s for r in loaders)  # type: ignore[union-attr]
    batches = sum(r.loader.batches for r in loaders)  # type: ignore[union-attr]

    disks = [(r.elapsed_s, d) for r in records if (d := disk_of(r)) is not None]
    reads = sum(w * d.r_s for w, d in disks)
    read_mb = sum(w * d.rmb_s for w, d in disks)
    gpu = [(r.elapsed_s, u) for r in records if (u := gpu_util(r)) is not None]
    warnings: dict[str, int] = defaultdict(int)
    for r in records:
        for text in r.verdict.warnings if r.verdict is not None else []:
            warnings[text] += 1
    return Summary(
        name=name,
        start=min(r.ts - r.elapsed_s for r in records),
        end=max(r.ts for r in records),
        duration_s=total,
        intervals=len(records),
        verdict_shares=shares,
        top_fix=top[1] if top else None,
        top_fix_verdict=top[0] if top else None,
        batches_s=batches / loop_s if loop_s > 0 else None,
        wait_share=wait / (wait + step) if wait + step > 0 else None,
        disk_read_mb_s=_weighted([(w, d.rmb_s) for w, d in disks]),
        disk_read_mb_s_max=max((d.rmb_s for _, d in disks), default=None),
        disk_r_s=_weighted([(w, d.r_s) for w, d in disks]),
        disk_rareq_kb=read_mb * 1024 / reads if reads > 0 else None,
        disk_r_await_ms=(sum(w * d.r_s * d.r_await for w, d in disks) / reads if reads else None),
        disk_util=_weighted([(w, d.util) for w, d in disks]),
        gpu_util=_weighted(gpu),
        gpus=max((len(r.gpus) for r in records if r.gpus), default=0),
        warnings=dict(warnings),
    )


# --- text ---


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


def render(s: Summary) -> str:
    out = [
        f"run: {s.name}  {_clock(s.start)} -> {_clock(s.end)} UTC "
        f"({_duration(s.duration_s)}, {s.intervals} intervals)",
        "time share of each verdict:",
        *(f"  {share * 100:5.1f}%  {verdict}" for verdict, share in s.verdict_shares.items()),
    ]
    if s.top_fix:
        out.append(f"top fix: {s.top_fix}  (for {s.top_fix_verdict})")
    else:
        out.append("top fix: none suggested")
    out.append(
        "throughput: "
        + (f"{s.batches_s:,.2f} batches/s" if s.batches_s is not None else "no loop figures")
        + f"; data-wait share: {_pct(s.wait_share)} of step time"
    )
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
    out.append(
        f"GPU: {_num(s.gpu_util, '%', 0)} mean utilisation over {s.gpus} GPU(s)"
        if s.gpu_util is not None
        else "GPU: no figures in this run (no GPU or no NVML)"
    )
    for text, count in sorted(s.warnings.items(), key=lambda kv: -kv[1])[:5]:
        out.append(f"warning ({count} intervals): {text}")
    return "\n".join(out)


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or a == 0:
        return ""
    return f"x{b / a:.2f}"


def _points(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return ""
    return f"{(b - a) * 100:+.0f} pts"


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
        row("batches/s", "batches_s", lambda v: _num(v, digits=2), _ratio),
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


# --- the PNG timeline ---


def _series(records: Sequence[IntervalRecord], start: float, scale: float) -> dict[str, list]:
    rows: dict[str, list] = defaultdict(list)
    for r in records:
        t = (r.ts - start) / scale
        disk = disk_of(r)
        rows["t"].append(t)
        rows["t0"].append((r.ts - r.elapsed_s - start) / scale)
        rows["mb"].append(disk.rmb_s if disk else float("nan"))
        util = gpu_util(r)
        rows["gpu"].append(float("nan") if util is None else util)
        share = wait_share(r)
        rows["wait"].append(float("nan") if share is None else share * 100)
        rows["verdict"].append(verdict_of(r))
    return rows


def plot(runs: Sequence[tuple[str, Sequence[IntervalRecord]]], png: str | Path) -> Path:
    """Verdict strip(s), disk read MB/s, GPU utilisation and data-wait share on one time axis
    (minutes since each run's start, so two runs overlay)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        raise UserError(
            "the PNG needs matplotlib: pip install 'diskinfo[report]' (or pass --no-png)"
        ) from None
    styles = ["-", "--"]
    colours = ["#1f77b4", "#d62728"]
    n = len(runs)
    fig, axes = plt.subplots(
        n + 3,
        1,
        sharex=True,
        figsize=(11, 2.2 + 2.1 * 3),
        gridspec_kw={"height_ratios": [0.35] * n + [1, 1, 1]},
    )
    strips, (ax_disk, ax_gpu, ax_wait) = axes[:n], axes[n:]
    seen_verdicts: dict[str, None] = {}
    longest = max(
        max(r.ts for r in recs) - min(r.ts - r.elapsed_s for r in recs) for _, recs in runs
    )
    scale, unit = (60.0, "minutes") if longest >= 120 else (1.0, "seconds")
    has = {"gpu": False, "wait": False}
    for i, (name, records) in enumerate(runs):
        start = min(r.ts - r.elapsed_s for r in records)
        s = _series(records, start, scale)
        label = f"{'AB'[i]}: {name}" if n > 1 else None
        for t0, t1, v in zip(s["t0"], s["t"], s["verdict"], strict=True):
            strips[i].axvspan(t0, t1, color=COLOURS.get(v, "#7f7f7f"), lw=0)
            seen_verdicts[v] = None
        strips[i].set_yticks([])
        strips[i].set_ylabel(
            "A" if n > 1 and i == 0 else "B" if n > 1 else "verdict",
            rotation=0,
            ha="right",
            va="center",
        )
        x = [s["t0"][0], *s["t"]]  # each value holds over its interval: steps
        kw = {"color": colours[i % 2], "linestyle": styles[i % 2], "drawstyle": "steps-pre"}
        ax_disk.plot(x, [s["mb"][0], *s["mb"]], label=label, **kw)
        for ax, key in ((ax_gpu, "gpu"), (ax_wait, "wait")):
            if any(v == v for v in s[key]):  # NaN != NaN: absent figures
                has[key] = True
                ax.plot(x, [s[key][0], *s[key]], label=label, **kw)
    ax_disk.set_ylabel("disk read\nMB/s")
    ax_disk.set_ylim(bottom=0)
    for ax, key, ylabel, missing in (
        (ax_gpu, "gpu", "GPU util\n%", "no GPU figures in this run (no GPU or no NVML)"),
        (
            ax_wait,
            "wait",
            "data-wait\n% of step",
            "no data-loader figures (loop not wrapped with diskinfo.torch.watch)",
        ),
    ):
        ax.set_ylabel(ylabel)
        ax.set_ylim(0, 105)
        if not has[key]:
            ax.text(
                0.5, 0.5, missing, transform=ax.transAxes, ha="center", va="center", color="#555555"
            )
    for ax in (ax_disk, ax_gpu, ax_wait):
        ax.grid(True, alpha=0.3)
    if n > 1:
        ax_disk.legend(loc="upper right", fontsize="small")
    ax_wait.set_xlabel(f"{unit} since the start of the run (each value spans its interval)")
    strips[0].legend(
        handles=[Patch(color=COLOURS.get(v, "#7f7f7f"), label=v) for v in seen_verdicts],
        loc="lower left",
        bbox_to_anchor=(0, 1.02),
        ncol=3,
        fontsize="small",
        frameon=False,
    )
    title = " vs ".join(name for name, _ in runs)
    fig.suptitle(f"diskinfo report: {title}", y=0.995)
    fig.tight_layout()
    png = Path(png)
    try:
        fig.savefig(png, dpi=110)
    except OSError as exc:
        raise UserError(f"cannot write {png}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
    return png
