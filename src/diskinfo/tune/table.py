"""Choose the best setting and present the results: a text table, JSON and a PNG."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from diskinfo.fileio import write_atomic
from diskinfo.png import pyplot, save
from diskinfo.tune import mix
from diskinfo.tune.runner import Result

TIE = 0.03  # settings within 3% of the fastest count as equal: the cheapest of them wins
# Below this per measurement, one setting's rate varied 5-12% from reading to reading on two
# shared cores (3 s: 2-3%; docs/tune.md): settings within NEAR of the pick are not told apart
SHORT_LOOK_S = 3.0
NEAR = 0.10


def best(results: list[Result], epoch: int | None) -> Result:
    """The fastest by whole-epoch samples/s; among those within TIE of it, the cheapest."""
    top = max(r.epoch_rate(epoch) for r in results)
    near = [r for r in results if r.epoch_rate(epoch) >= (1 - TIE) * top]
    return min(near, key=lambda r: (r.setting.cost(), -r.epoch_rate(epoch)))


def render(results: list[Result], current: Result, chosen: Result, epoch: int | None) -> str:
    """The table; with shards among the settings, a `batch mix` column beside the rates
    (tune/mix.py) and a line under it that says what it holds."""
    with_mix = mix.shown(results)
    head = (
        f"{'setting':<58} {'samples/s':>10} {'over epoch':>10} "
        + (f"{'batch mix':>14} " if with_mix else "")
        + f"{'start s':>8} {'next s':>7} {'data-wait':>9} {'CPU/worker':>10} {'cache':>11}  "
        "vs current"
    )
    lines = [head]
    for r in sorted(results, key=lambda r: -r.epoch_rate(epoch)):
        mark = " (current)" if r is current else (" <- best" if r is chosen else "")
        cpu = f"main {r.cpu_per_worker:.0%}" if not r.setting.num_workers else (
            f"{r.cpu_per_worker:.0%}")  # fmt: skip
        restart = "-" if r.restart_s is None else f"{r.restart_s:.2f}"
        lines.append(
            f"{r.setting.label():<58} {r.rate:>10,.0f} {r.epoch_rate(epoch):>10,.0f} "
            + (f"{mix.cell(r.mix):>14} " if with_mix else "")
            + f"{r.start_s:>8.2f} {restart:>7} {r.wait_share:>9.0%} {cpu:>10} {r.cache:>11}  "
            f"{gain(r, current, epoch):.2f}x{mark}"
        )
    if with_mix:
        lines.append(mix.LEGEND)
    return "\n".join(lines)


def gain(r: Result, current: Result, epoch: int | None) -> float:
    base = current.epoch_rate(epoch)
    return r.epoch_rate(epoch) / base if base else float("inf")


def verdict(
    chosen: Result,
    current: Result,
    epoch: int | None,
    batch_size: int,
    saturated: str | None = None,
) -> list[str]:
    """The pick and its gain; with the step filling the cores (`saturated`, cap.py's words),
    no setting with more workers is promised: the workers would take their CPU from it."""
    g = gain(chosen, current, epoch)
    more = chosen.setting.num_workers > current.setting.num_workers
    if saturated and (more or chosen is current or g < 1 + TIE):
        alone = f" (as measured, {chosen.setting.label()}: {g:.2f}x)" if more else ""
        return [f"best: the current setting ({current.setting.label()}): {saturated}{alone}"]
    if chosen is current or g < 1 + TIE:
        return [
            f"best: the current setting ({current.setting.label()}): "
            f"{current.epoch_rate(epoch):,.0f} samples/s; nothing measured beat it by {TIE:.0%}"
        ]
    lines = _gain_lines(chosen, current, epoch, batch_size)
    return [*lines, *([f"note: {saturated}"] if saturated else [])]


def _gain_lines(chosen: Result, current: Result, epoch: int | None, batch_size: int) -> list[str]:
    g = gain(chosen, current, epoch)
    kwargs = ", ".join(f"{k}={v!r}" for k, v in chosen.setting.loader_kwargs().items())
    source = "the packed shards (FACTORY(shards=DEST))" if chosen.setting.shards else "dataset"
    return [
        f"best: {chosen.setting.label()}: {chosen.epoch_rate(epoch):,.0f} samples/s, "
        f"{g:.2f}x the current setting ({current.setting.label()}: "
        f"{current.epoch_rate(epoch):,.0f} samples/s)",
        f"apply: DataLoader({source}, batch_size={batch_size}, {kwargs})",
    ]


def caveat(results: list[Result], chosen: Result, epoch: int | None, budget: float) -> list[str]:
    """Said when the pick among close settings rests on readings too short to tell them apart:
    the table's order among them is then partly luck, and a longer budget settles it."""
    look = statistics.median(r.seconds / r.measurements for r in results)
    rate = chosen.epoch_rate(epoch)
    close = [
        r for r in results if r is not chosen and abs(r.epoch_rate(epoch) - rate) < NEAR * rate
    ]
    if look >= SHORT_LOOK_S or not close:
        return []
    return [
        f"note: each setting was read for about {look:.1f} s of the {budget:g} s budget, too "
        f"short to tell apart settings within {NEAR:.0%} of each other ({len(close)} more "
        f"here): a longer --budget (the default is 120 s) gives a firmer pick"
    ]


def write_json(path: Path, document: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(document, indent=1) + "\n", owned=True)


def plot(path: Path, results: list[Result], current: Result, chosen: Result, epoch: int | None,
         title: str) -> bool:  # fmt: skip
    """A bar per setting (whole-epoch samples/s); False when matplotlib is missing."""
    plt = pyplot()
    if plt is None:
        return False
    ordered = sorted(results, key=lambda r: r.epoch_rate(epoch))
    colours = [
        "#2ca02c" if r is chosen else "#7f7f7f" if r is current else "#1f77b4" for r in ordered
    ]
    fig, ax = plt.subplots(figsize=(10, 0.35 * len(ordered) + 1.5))
    ax.barh([r.setting.label() for r in ordered], [r.epoch_rate(epoch) for r in ordered],
            color=colours)  # fmt: skip
    ax.set_xlabel("samples/s over an epoch (green: best, grey: current)")
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    save(fig, path, dpi=100)
    return True
