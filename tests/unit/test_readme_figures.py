"""The figures README.md quotes are the ones benchmarks/results/ holds, and its example verdict
is one the monitor says: rerunning a benchmark or rewording a verdict without updating the
README fails here, not in a user's hands."""

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


def test_the_readme_s_verdict_line_is_one_the_monitor_says_today() -> None:
    """README's example verdict went stale when the fixes' wording changed ('try: raise
    DataLoader num_workers=0 to num_workers=2 (2 cores)' is nothing the monitor says). The
    example's figures (num_workers=0, the training process at 144% of a core, 2 cores) must
    give its words, summary and fix."""
    from diskinfo.analyse.verdict import decide
    from diskinfo.record import ProcessIO
    from tests.helpers.records import host, loader
    from tests.helpers.records import training_record as rec

    readme = (ROOT / "README.md").read_text()
    line = next(x for x in readme.splitlines() if "[Verdict] input-bound: cpu: " in x)
    said = re.match(
        r"\S+ \[Verdict\] input-bound: cpu: (.+) \(was unknown\) \| try: (.+) \(details", line
    )
    assert said, line
    figures = host(busy=73)
    figures.cpu_count, figures.cgroup_cpu_allowed = 2, None
    main = [ProcessIO(pid=2, name="python", role="main", cpu_percent=144)]
    v = decide(rec(loader=loader(0.44), cpu=figures, procs=main), {})
    assert (v.summary, v.fixes[0]) == (said[1], said[2])
