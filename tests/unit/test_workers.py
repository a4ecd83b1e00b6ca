"""The num_workers advice: one plan gives the words and the number the verdict carries."""

from __future__ import annotations

from dataclasses import replace

from diskinfo.analyse.signals import signals
from diskinfo.analyse.workers import (
    step_saturates,
    workers_fix,
    workers_target,
    workers_target_in_words,
)
from diskinfo.record import ProcessIO
from tests.helpers.records import host, loader
from tests.helpers.records import training_record as rec


def plan(main_pct: float, cores: int = 2, workers: int = 0):
    main = [ProcessIO(pid=2, name="python", role="main", cpu_percent=main_pct)]
    s = signals(
        rec(
            loader=loader(0.5, workers=workers),
            cpu=replace(host(busy=40), cpu_count=cores),
            procs=main,
        ),
        {},
    )
    return workers_fix(s), workers_target(s)


def test_the_words_and_the_target_come_from_one_plan():
    words, target = plan(100, cores=8)
    assert words.startswith("num_workers 0 -> 2: ") and target == 2
    assert workers_target_in_words(words) == target  # what old records are read by


def test_a_step_that_fills_the_cores_names_no_target():
    words, target = plan(150)
    assert words == "more workers will not help: the step uses 2.0 of 2 cores"
    assert target is None and workers_target_in_words(words) is None
    assert step_saturates(1.0, 2) is None


def test_workers_that_already_have_every_core_get_no_fix():
    assert plan(100, cores=2, workers=2) == (None, None)
