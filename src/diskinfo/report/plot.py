"""The PNG timeline: verdict strips, disk read MB/s, GPU utilisation and data-wait share on one
time axis (matplotlib, the optional `diskinfo[report]`, through diskinfo.png)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from diskinfo.analyse.signals import busiest_device
from diskinfo.analyse.tally import NO_VERDICT, verdict_of
from diskinfo.errors import UserError
from diskinfo.png import pyplot, save
from diskinfo.record import VERDICTS, IntervalRecord
from diskinfo.report.summary import gpu_util, wait_share


class NoMatplotlib(UserError):
    """The optional dependency is missing: the summary stands without the PNG."""


COLOURS = {
    **dict(
        zip(
            VERDICTS,
            ("#d62728", "#ff7f0e", "#9467bd", "#2ca02c", "#17becf", "#bbbbbb", "#7f7f7f"),
            strict=True,
        )
    ),
    NO_VERDICT: "#eeeeee",
}


def _series(records: Sequence[IntervalRecord], start: float, scale: float) -> dict[str, list]:
    rows: dict[str, list] = defaultdict(list)
    for r in records:
        t = (r.ts - start) / scale
        disk = busiest_device(r)
        rows["t"].append(t)
        rows["t0"].append((r.ts - r.elapsed_s - start) / scale)
        rows["mb"].append(disk.rmb_s if disk else float("nan"))
        util = gpu_util(r)
        rows["gpu"].append(float("nan") if util is None else util)
        share = wait_share(r)
        rows["wait"].append(float("nan") if share is None else share * 100)
        rows["verdict"].append(verdict_of(r))
    return rows


def spans(
    starts: Sequence[float], ends: Sequence[float], verdicts: Sequence[str]
) -> list[tuple[float, float, str]]:
    """Intervals that follow each other under one verdict as one span: a day at 5 s is 17,280
    intervals, and a patch for each made the PNG of a 19-hour run take 12 s. A gap (the
    monitor down, or the time between two runs) ends a span."""
    out: list[tuple[float, float, str]] = []
    for t0, t1, v in zip(starts, ends, verdicts, strict=True):
        if out and out[-1][2] == v and t0 - out[-1][1] <= (t1 - t0) / 2:
            out[-1] = (out[-1][0], t1, v)
        else:
            out.append((t0, t1, v))
    return out


def plot(runs: Sequence[tuple[str, Sequence[IntervalRecord]]], png: str | Path) -> Path:
    """Verdict strip(s), disk read MB/s, GPU utilisation and data-wait share on one time axis
    (minutes since each run's start, so two runs overlay)."""
    plt = pyplot()
    if plt is None:
        raise NoMatplotlib(
            "the PNG needs matplotlib: pip install 'diskinfo[report]' (or pass --no-png)"
        )
    from matplotlib.patches import Patch

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
    scale, unit = (
        (3600.0, "hours") if longest >= 3 * 3600 else (60.0, "minutes") if longest >= 120
        else (1.0, "seconds")
    )  # fmt: skip
    has = {"gpu": False, "wait": False}
    for i, (name, records) in enumerate(runs):
        start = min(r.ts - r.elapsed_s for r in records)
        s = _series(records, start, scale)
        label = f"{'AB'[i]}: {name}" if n > 1 else None
        for t0, t1, v in spans(s["t0"], s["t"], s["verdict"]):
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
        save(fig, png, dpi=110)
    except OSError as exc:
        raise UserError(f"cannot write {png}: {exc.strerror or exc}") from None
    return png
