"""Tests lead to the code: the rule ARCHITECTURE.md states, checked.

Every module under src/diskinfo with logic (a function or a class) is driven by a test that
imports it (a test file named for the module where one module is the concept:
`test_<module>.py`; a test named for the concept where several modules make it:
`test_shards.py` reads through shardlist, stream and tarstream). A module that no test
imports is reached another way (through the CLI, a subprocess, the module that wraps it): it
is listed in THROUGH with the test that drives it, and that test must name it.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tests.helpers import ROOT

SRC = ROOT / "src"
# module -> (the test that drives it, a word of that test that shows it does)
THROUGH: dict[str, tuple[str, str]] = {
    "diskinfo.analyse.binding": ("tests/unit/test_shared_node.py", "binding"),
    "diskinfo.analyse.contention": ("tests/unit/test_diagnoser.py", "contention"),
    "diskinfo.analyse.evidence": ("tests/unit/test_verdict.py", "evidence"),
    "diskinfo.job_identity": ("tests/unit/test_job_verdict.py", "job_identity"),
    "diskinfo.rank_record": ("tests/unit/test_job_verdict.py", "RankFigures"),
    "diskinfo.report.job": ("tests/unit/test_job_verdict.py", "diskinfo report"),
    "diskinfo.sources.peer_logs": ("tests/unit/test_job_verdict.py", "peer"),
    "diskinfo.commands.bench": ("tests/system/test_bench_vs_fio.py", "bench"),
    "diskinfo.commands.pack": ("tests/unit/test_pack.py", "cli"),
    "diskinfo.commands.tune": ("tests/unit/test_tune.py", "cli"),
    "diskinfo.complaints": ("tests/unit/test_write_failures.py", "said_once"),
    "diskinfo.owner": ("tests/unit/test_heartbeat.py", "owner"),
    "diskinfo.png": ("tests/unit/test_report.py", "png"),
    "diskinfo.privileges": ("tests/unit/test_privileges.py", "started as root"),
    "diskinfo.report.runs": ("tests/unit/test_report.py", "--run"),
    "diskinfo.shards.mixing": ("tests/unit/test_pack_labels.py", "mixing"),
    "diskinfo.shards.pack.progress": ("tests/unit/test_pack.py", "progress"),
    "diskinfo.shards.pack.source": ("tests/unit/test_pack_access.py", "source_owner"),
    "diskinfo.shards.stream": ("tests/unit/test_shards_training.py", "shuffle_buffer"),
    "diskinfo.sinks.prometheus.metrics": ("tests/unit/test_metric_names.py", "diskinfo_"),
    "diskinfo.sinks.prometheus.server": (
        "tests/unit/test_prometheus_exporter.py",
        "PrometheusSink",
    ),
    "diskinfo.tune.cache": ("tests/system/test_tune_cold.py", "cache"),
}


def modules() -> dict[str, Path]:
    return {
        ".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): p
        for p in SRC.rglob("*.py")
    }


def has_logic(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    return any(isinstance(n, ast.FunctionDef | ast.ClassDef) for n in tree.body)


@cache
def imported_by_tests() -> frozenset[str]:
    found: set[str] = set()
    for test in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(test.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return frozenset(found)


def test_every_module_with_logic_is_driven_by_a_test() -> None:
    untested = [
        name
        for name, path in sorted(modules().items())
        if has_logic(path) and name not in imported_by_tests() and name not in THROUGH
    ]
    assert not untested, (
        f"no test imports {untested}: add tests/unit/test_<module>.py, or list the test that "
        "drives it in THROUGH (tests/unit/test_test_map.py)"
    )


def test_the_map_names_tests_that_drive_their_module() -> None:
    for name, (test, word) in THROUGH.items():
        assert name in modules(), f"THROUGH names {name}, which is gone"
        assert name not in imported_by_tests(), f"{name} is imported by a test now: drop it"
        assert word in (ROOT / test).read_text(), f"{test} does not mention {word!r} ({name})"
