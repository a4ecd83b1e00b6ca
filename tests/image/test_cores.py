"""Cores available to a container started with `--cpus` below its cpuset: the verdict's
num_workers advice, `diskinfo tune`'s num_workers ladder and validate-cuda's report all count
the quota, not the cpuset (under --cpus=2 on a 16-core host, tune used to try 16 workers)."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

pytestmark = pytest.mark.image

# A training process that wants 1.45 cores with num_workers=0, judged on this container's
# own CPU figures as the monitor's host collector reads them.
JUDGE = textwrap.dedent(
    """
    import json, sys, time
    from diskinfo.analyse.verdict import decide
    from diskinfo.collectors.host import HostCollector
    from diskinfo.record import IntervalRecord, LoaderFigures, ProcessIO
    from diskinfo.tune import grid
    sys.path.insert(0, "/usr/local/lib/pytorch-cuda")
    from scripts.validate_cuda.machine import environment

    host = HostCollector()
    host.start()
    time.sleep(1.0)
    record = IntervalRecord(
        ts=time.time(),
        elapsed_s=1.0,
        loader=LoaderFigures(batches=10, wait_s=0.44, step_s=0.56, wait_share=0.44,
                             processes=1, num_workers=0),
        # 70% of a core, of which 44 points are loading: a step of 0.46 cores, which one core
        # holds (at 145% the step alone would want 1.8 cores: no worker could help under --cpus=1)
        procs=[ProcessIO(pid=2, name="python", role="main", cpu_percent=70)],
    )
    host.fill(record)
    print(json.dumps({
        "allowed": record.cpu.cgroup_cpu_allowed,
        "ladder": grid.ladder(grid.cores()),
        "fix": decide(record, {}).fixes[0],
        "validate_cuda": environment(None, None)["cores"],
    }))
    """
)


def _judged(container, **limits) -> dict:
    running = container("python", "-c", JUDGE, **limits)
    assert running.wait(timeout=120) == 0, running.logs()[-3000:]
    lines = running.logs().splitlines()  # supervisord's own lines come between
    return json.loads(next(line for line in reversed(lines) if line.startswith("{")))


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs a cpuset of 2 cores or more")
def test_cpus_below_the_cpuset_bounds_the_verdict_tune_and_validate_cuda(container):
    capped = _judged(container, nano_cpus=10**9)  # --cpus=1
    assert capped["allowed"] == 1.0
    assert capped["ladder"] == [0, 1]
    assert capped["fix"].startswith("num_workers 0 -> 1:"), capped["fix"]
    assert capped["validate_cuda"] == 1.0
    free = _judged(container)
    cores = os.cpu_count() or 1
    assert free["allowed"] == cores and free["ladder"][-1] == cores
    assert free["fix"].startswith("num_workers 0 -> 2:"), free["fix"]
