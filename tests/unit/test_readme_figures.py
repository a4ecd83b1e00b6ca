"""The figures README.md quotes are the ones benchmarks/results/ holds: rerunning a benchmark
without updating the README fails here, not in a user's hands."""

from __future__ import annotations

import re

from tests.helpers import ROOT


def test_overhead_figures_are_those_of_the_last_run() -> None:
    table = (ROOT / "benchmarks" / "results" / "overhead.md").read_text()

    def row(name: str) -> list[str]:
        line = next(x for x in table.splitlines() if x.startswith(f"| `{name}` |"))
        return [cell.strip() for cell in line.strip("|").split("|")]

    full, iostat = row("diskinfo watch --interval 1"), row("iostat -dx 1")
    ms, core, rss = float(full[1].split()[0]), float(full[2]), float(full[4])
    readme = re.sub(r"\s+", " ", (ROOT / "README.md").read_text())
    quoted = (
        f"at `--interval 1`, {ms:.2f} ms of CPU per sample ({core:.2f}% of one core) and "
        f"{rss:.0f} MB of memory; `iostat -dx 1` beside it took "
        f"{float(iostat[1].split()[0]):.2f} ms per sample"
    )
    assert quoted in readme, quoted


def test_the_device_count_where_iostat_costs_more_is_inside_the_measured_bracket() -> None:
    table = (ROOT / "benchmarks" / "results" / "overhead-devices.md").read_text()
    ratios = {
        int(cells[0]): float(cells[4].rstrip("x"))
        for line in table.splitlines()
        if re.match(r"\| \d+ \|", line)
        for cells in [[c.strip() for c in line.strip("|").split("|")]]
    }
    readme = re.sub(r"\s+", " ", (ROOT / "README.md").read_text())
    said = re.search(
        r"from about (\d+) block devices on, the monitor costs less than iostat", readme
    )
    assert said, "README no longer says where the monitor gets cheaper than iostat"
    above = max(n for n, r in ratios.items() if r > 1.0)
    below = min(n for n, r in ratios.items() if r <= 1.0)
    assert above < below and above < int(said[1]) <= below, (ratios, said[0])
