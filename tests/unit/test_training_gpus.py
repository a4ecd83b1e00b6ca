"""The GPUs the training uses, and only those, speak for it: verdict, summary, evidence, fixes,
/metrics, /status, the text log and the report."""

from __future__ import annotations

import copy
import sys
import types
from dataclasses import replace

import pytest

from diskinfo.analyse.baseline import DeviceBaseline
from diskinfo.analyse.pressure import status_document
from diskinfo.analyse.verdict import decide
from diskinfo.collectors.training_gpus import Hints, mark, visible
from diskinfo.record import GpuFigures, ProcessIO, VerdictName
from diskinfo.report.summary import summarise
from diskinfo.report.text import render
from diskinfo.sinks.prometheus.render import RecordCollector, _Totals
from diskinfo.sinks.textlog import evidence_lines
from diskinfo.torch import cuda_device_uuids
from tests.helpers.records import disk, loader
from tests.helpers.records import training_record as rec

BASE = {"nvme0n1": DeviceBaseline("nvme0n1", seq_read_mb_s=1000.0, rand_read_iops=20000.0)}


def uuid(i: int) -> str:
    return f"GPU-{i:08x}-aaaa-bbbb-cccc-dddddddddddd"


def busy(i: int = 0) -> GpuFigures:
    return GpuFigures(i, "H100", 96, 90, 100, 0.0, 0.0, 40_000, 81_559, samples=50, uuid=uuid(i))


def pulsing(i: int = 0) -> GpuFigures:
    return GpuFigures(i, "H100", 45, 0, 100, 0.5, 0.9, 40_000, 81_559, samples=50, bursts=5,
                      uuid=uuid(i))  # fmt: skip


def idle(i: int) -> GpuFigures:
    return GpuFigures(i, "H100", 0, 0, 0, 1.0, 0.0, 4, 81_559, samples=50, uuid=uuid(i))


def eight(training: GpuFigures, at: int = 0) -> list[GpuFigures]:
    """An 8-GPU node: the training's GPU at index `at`, seven idle ones nobody uses."""
    gpus = [idle(i) for i in range(8)]
    gpus[at] = replace(training, index=at, uuid=uuid(at))
    return gpus


CASES = {
    "loop, GPU busy": dict(loader=loader(0.02, workers=8), gpu=busy()),
    "loop, waits for the disk": dict(
        loader=loader(0.4, workers=8),
        gpu=pulsing(),
        devices=[disk(r_s=3000, rmb_s=950, rareq_sz=320, util=99)],
    ),
    "no loop, GPU busy": dict(gpu=busy()),
    "no loop, GPU pulsing, disk busy": dict(
        gpu=pulsing(), devices=[disk(r_s=3000, rmb_s=950, rareq_sz=320, util=99)]
    ),
    "no loop, GPU idle": dict(gpu=idle(0)),
}


def one_and_eight(case: dict, at: int = 0, by: str = "memory"):
    parts = {k: v for k, v in case.items() if k != "gpu"}
    one = rec(gpus=[case["gpu"]], **copy.deepcopy(parts))
    node = rec(gpus=eight(case["gpu"], at), **copy.deepcopy(parts))
    hints = Hints(wrapper_uuids=[uuid(at)]) if by == "wrapper" else Hints()
    if case["gpu"].util_max == 0:  # the training holds its GPU's memory, even while it idles
        node.gpus[at].mem_used_mb = one.gpus[0].mem_used_mb = 40_000
    mark(node.gpus, hints)
    mark(one.gpus, hints if by == "wrapper" else Hints())
    return one, node


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("by", ["wrapper", "memory"])
def test_eight_gpus_with_training_on_one_get_the_one_gpu_verdict(name, by):
    one, node = one_and_eight(CASES[name], by=by)
    assert [g.training for g in node.gpus] == [True] + [False] * 7
    a, b = decide(one, BASE), decide(node, BASE)
    assert (a.verdict, a.cause, a.summary, a.evidence, a.fixes) == (
        b.verdict,
        b.cause,
        b.summary,
        b.evidence,
        b.fixes,
    )


@pytest.mark.parametrize("name", CASES)
def test_the_training_gpu_need_not_be_the_first(name):
    one, node = one_and_eight(CASES[name], at=5, by="wrapper")
    a, b = decide(one, BASE), decide(node, BASE)
    assert (a.verdict, a.summary, a.fixes) == (b.verdict, b.summary, b.fixes)
    assert any("GPU 5:" in e for e in b.evidence) or not any("GPU 0:" in e for e in a.evidence)


def test_a_busy_gpu_among_idle_ones_is_not_called_idle():
    """The report behind this: GPU 0 at 96% and seven idle GPUs were judged by the idlest."""
    node = rec(gpus=eight(busy()))
    before = decide(node, BASE)  # nothing marked: every GPU judged, as records from before
    assert before.verdict == VerdictName.IDLE and before.cause == "gpu-idle"
    mark(node.gpus, Hints())
    after = decide(node, BASE)
    assert after.verdict == VerdictName.COMPUTE_BOUND and "idle" not in after.summary


def test_ddp_over_every_gpu_judges_every_gpu():
    """Eight ranks: one starved GPU makes the verdict (the run is as fast as its slowest)."""
    gpus = [replace(busy(), index=i, uuid=uuid(i)) for i in range(8)]
    gpus[6] = replace(pulsing(), index=6, uuid=uuid(6))
    node = rec(gpus=gpus, devices=[disk(r_s=3000, rmb_s=950, rareq_sz=320, util=99)])
    mark(node.gpus, Hints(wrapper_uuids=[uuid(i) for i in range(8)]))
    assert all(g.training for g in node.gpus)
    v = decide(node, BASE)
    assert v.verdict == VerdictName.INPUT_DISK and any("GPU 6:" in e for e in v.evidence)


def test_no_gpu_in_use_makes_no_gpu_verdict():
    node = rec(gpus=[idle(i) for i in range(8)], procs=[ProcessIO(10, "python", role="main")])
    mark(node.gpus, Hints())
    assert not any(g.training for g in node.gpus)
    v = decide(node, BASE)
    assert v.cause != "gpu-idle" and "no GPU to judge by" in v.summary


def test_hints_strongest_first():
    gpus = [idle(i) for i in range(4)]
    gpus[2].mem_used_mb = 30_000  # another job's memory on GPU 2
    # the wrapper's UUIDs win over memory
    mark(gpus, Hints(wrapper_uuids=[uuid(1)]))
    assert [g.training for g in gpus] == [False, True, False, False]
    assert gpus[1].training_by == "wrapper"
    # NVML's PIDs, where they are ours, over memory
    h = Hints(tree_pids=[100, 101], nvml_pids={0: [], 1: [555], 3: [101]}, pids_are_ours=True)
    mark(gpus, h)
    assert [g.training for g in gpus] == [False, False, False, True]
    assert gpus[3].training_by == "nvml-pids"
    # in a container NVML's host PIDs are not ours: a tree PID equal to one means nothing
    mark(gpus, replace(h, pids_are_ours=False))
    assert [g.training for g in gpus] == [False, True, True, True]  # processes listed, memory
    assert gpus[0].training_by == "memory"
    # CUDA_VISIBLE_DEVICES narrows what memory may pick
    mark(gpus, Hints(visible_devices="3,1"))
    assert [g.training for g in gpus] == [False, False, False, False]
    mark(gpus, Hints(visible_devices="GPU-00000002"))
    assert [g.training for g in gpus] == [False, False, True, False]
    assert gpus[2].training_by == "visible-devices"


def test_cuda_visible_devices_forms():
    gpus = [idle(i) for i in range(4)]
    assert visible(gpus, None) is None
    assert [g.index for g in visible(gpus, "2,0")] == [2, 0]
    assert [g.index for g in visible(gpus, "1,-1,3")] == [1]  # CUDA stops at an invalid index
    assert visible(gpus, "") == [] and visible(gpus, "-1") == []
    assert [g.index for g in visible(gpus, f"{uuid(3)}")] == [3]
    assert visible(gpus, "MIG-unknown") is None  # names nothing known: narrows nothing


def test_unused_gpus_are_shown_as_unused_and_left_out_of_means():
    node = rec(gpus=eight(busy()), loader=loader(0.02, workers=8))
    mark(node.gpus, Hints())
    node.verdict = decide(node, BASE)
    lines = evidence_lines(node)
    assert "unused" not in lines[0] and all("(unused by the training)" in x for x in lines[1:8])
    doc = status_document(node, now=node.ts)
    assert doc["gpu_util_mean"] == pytest.approx(96) and doc["gpus_unused"] == list(range(1, 8))
    families = {f.name: f for f in RecordCollector(lambda: (node, _Totals())).collect()}
    fam = families["diskinfo_gpu_training"]
    training = {dict(zip(fam.labels, values, strict=True))["gpu"]: v for values, v in fam.samples}
    assert training == {"0": 1.0, **{str(i): 0.0 for i in range(1, 8)}}
    text = render(summarise([node]))
    assert "96% mean utilisation over 1 GPU(s) of the training (7 more unused" in text


def test_mig_and_lost_gpus_are_not_judged():
    gpus = [busy(0), replace(idle(1), state="no-utilisation", samples=0)]
    gpus.append(replace(idle(2), state="lost", samples=0))
    node = rec(gpus=gpus, loader=loader(0.02, workers=8))
    alone = rec(gpus=[busy()], loader=loader(0.02, workers=8))
    assert decide(node, BASE).summary == decide(alone, BASE).summary
    lines = evidence_lines(node)
    assert "utilisation not supported (MIG)" in lines[1] and "lost" in lines[2]


def test_the_wrapper_never_initialises_cuda(monkeypatch):
    calls: list[str] = []

    def cuda(initialised: bool) -> types.SimpleNamespace:
        def record(name, value):
            def fn(*_a):
                calls.append(name)
                return value(*_a) if callable(value) else value

            return fn

        return types.SimpleNamespace(
            is_initialized=lambda: initialised,
            current_device=record("current_device", 1),
            device_count=record("device_count", 3),
            memory_reserved=record("memory_reserved", lambda i: 2**30 if i == 2 else 0),
            get_device_properties=record(
                "props", lambda i: types.SimpleNamespace(uuid=f"0000000{i}-aaaa")
            ),
        )

    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda(False)))
    assert cuda_device_uuids() == [] and calls == []
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda(True)))
    assert cuda_device_uuids() == ["GPU-00000001-aaaa", "GPU-00000002-aaaa"]
