"""validate-cuda's judging logic: every check's verdict and message, without a GPU."""

from __future__ import annotations

import importlib.util
import io
import json
import math
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scripts.validate_cuda import cli, common, drivers, judge, report
from tests.helpers import ROOT

PROC_PROPRIETARY = (
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"
)
PROC_OPEN = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
    "(dvs-builder@U22-I3-B17-02-5)  Tue Sep 23 09:55:41 UTC 2025\n"
    "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04.2)\n"
)
PROC_AARCH64_TWO_PART = (
    "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  565.77  Release Build  "
    "(nixbld@)  Sun Feb  9 11:08:26 UTC 2025\n"
)


# ------------------------------------------------------------------ driver


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (PROC_PROPRIETARY, "535.104.05"),
        (PROC_OPEN, "580.95.05"),
        (PROC_AARCH64_TWO_PART, "565.77"),
        ("GCC version:  gcc version 12.3.0\n", None),
        ("", None),
    ],
)
def test_proc_driver_version(text: str, version: str | None) -> None:
    assert drivers.parse_proc_driver_version(text) == version


def test_smi_driver_version() -> None:
    assert drivers.parse_smi_driver_version("535.104.05\n535.104.05\n") == "535.104.05"
    failed = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    assert drivers.parse_smi_driver_version(failed) is None


def test_no_driver_names_the_minimum() -> None:
    result = judge.judge_driver(common.DriverInfo(None, "none"), "11.8", "expected, from default")
    assert result.status == common.FAIL
    assert "no NVIDIA driver found" in result.detail
    assert "CUDA 11.8" in result.detail and ">= 520.61.05" in result.detail


@pytest.mark.parametrize("old", ["470.82.01", "520.56.06", "515.105.01", "450.80.02"])
def test_old_driver_fails_naming_the_minimum(old: str) -> None:
    result = judge.judge_driver(common.DriverInfo(old, "/proc/driver/nvidia/version"), "11.8", "x")
    assert result.status == common.FAIL
    assert f"driver {old}" in result.detail and "too old" in result.detail
    assert "needs driver >= 520.61.05" in result.detail
    assert result.value == old


@pytest.mark.parametrize(
    "good", ["520.61.05", "520.105.17", "525.60.13", "535.104.05", "580.95.05"]
)
def test_new_enough_driver_passes(good: str) -> None:
    result = judge.judge_driver(common.DriverInfo(good, "NVML", "12.2"), "11.8", "torch's build")
    assert result.status == common.PASS, result.detail
    assert "supports CUDA up to 12.2" in result.detail


def test_driver_judged_against_cuda_13() -> None:
    result = judge.judge_driver(
        common.DriverInfo("575.57.08", "nvidia-smi"), "13.0", "torch's build"
    )
    assert result.status == common.FAIL and ">= 580.65.06" in result.detail


def test_unknown_newer_cuda_uses_the_newest_known_minimum() -> None:
    result = judge.judge_driver(common.DriverInfo("570.86.15", "NVML"), "13.2", "torch's build")
    assert result.status == common.FAIL
    assert "580.65.06 (the minimum for CUDA 13.0, the newest release this check knows)" in (
        result.detail
    )


def test_driver_version_unreadable_but_libcuda_answers() -> None:
    ok = judge.judge_driver(common.DriverInfo(None, "libcuda", "12.2"), "11.8", "x")
    old = judge.judge_driver(common.DriverInfo(None, "libcuda", "11.4"), "11.8", "x")
    assert ok.status == common.PASS and old.status == common.FAIL
    assert "supports CUDA up to 11.4" in old.detail


@given(st.tuples(st.integers(515, 525), st.integers(0, 200), st.integers(0, 99)))
def test_driver_verdict_is_numeric_not_lexical(parts: tuple[int, int, int]) -> None:
    version = "{}.{}.{:02d}".format(*parts)
    result = judge.judge_driver(common.DriverInfo(version, "NVML"), "11.8", "x")
    assert (result.status == common.PASS) == (parts >= (520, 61, 5))


def test_cuda_api_version_format() -> None:
    assert drivers.format_cuda_api_version(12020) == "12.2"
    assert drivers.format_cuda_api_version(11080) == "11.8"
    assert drivers.format_cuda_api_version(13000) == "13.0"


# ------------------------------------------------------------------ CUDA version and GPUs


def test_expected_cuda_sources_in_order() -> None:
    env = {"EXPECTED_CUDA": "12.1", "CUDA_VERSION": "11.8.0"}
    assert judge.resolve_expected_cuda("13.0", env) == ("13.0", "--expect-cuda")
    assert judge.resolve_expected_cuda(None, env) == ("12.1", "EXPECTED_CUDA")
    assert judge.resolve_expected_cuda(None, {"CUDA_VERSION": "11.8.0"}) == ("11.8", "CUDA_VERSION")
    assert judge.resolve_expected_cuda(None, {"EXPECTED_CUDA": ""}) == ("11.8", "default")


@pytest.mark.parametrize(
    ("option", "env"), [("11", {}), ("cu118", {}), (None, {"EXPECTED_CUDA": "x"})]
)
def test_bad_expected_cuda_is_a_usage_error(option: str | None, env: dict[str, str]) -> None:
    with pytest.raises(common.UsageError, match=r"is not a CUDA version like 11\.8"):
        judge.resolve_expected_cuda(option, env)


def test_mismatched_cuda_version() -> None:
    result = judge.judge_cuda_version("13.0", "2.9.0+cu130", "11.8", "default")
    assert result.status == common.FAIL
    assert "built for CUDA 13.0" in result.detail
    assert "expected CUDA 11.8 (from default)" in result.detail
    assert "pass --expect-cuda 13.0" in result.detail


def test_matching_cuda_version_and_cpu_build() -> None:
    assert (
        judge.judge_cuda_version("11.8", "2.7.1+cu118", "11.8", "EXPECTED_CUDA").status
        == common.PASS
    )
    cpu = judge.judge_cuda_version(None, "2.13.0+cpu", "11.8", "CUDA_VERSION")
    assert cpu.status == common.FAIL and "CPU-only build" in cpu.detail


def test_cuda_not_available_says_why() -> None:
    cpu = judge.judge_cuda_available(False, [], "2.13.0+cpu", None, "")
    assert cpu.status == common.FAIL and "CPU-only build" in cpu.detail
    cuda = judge.judge_cuda_available(False, [], "2.7.1+cu118", "11.8", "driver too old (11040)")
    assert "--gpus all" in cuda.detail and "driver too old (11040)" in cuda.detail
    ok = judge.judge_cuda_available(True, ["NVIDIA H200 (sm_90)"], "2.7.1+cu118", "11.8", "")
    assert ok.status == common.PASS and ok.value == 1


def test_gpu_arch() -> None:
    arches = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert judge.judge_gpu_arch([(9, 0)], ["NVIDIA H200"], arches).status == common.PASS
    assert (
        judge.judge_gpu_arch([(8, 9)], ["L4"], arches).status == common.PASS
    )  # sm_86 cubin runs on 8.9
    missing = judge.judge_gpu_arch([(9, 0), (10, 0)], ["H200", "B200"], arches)
    assert missing.status == common.FAIL and "GPU 1 B200 (sm_100)" in missing.detail
    assert "GPU 0" not in missing.detail
    jit = judge.judge_gpu_arch([(10, 0)], ["B200"], [*arches, "compute_90"])
    assert jit.status == common.PASS and "PTX JIT" in jit.detail


def test_library_version_formats() -> None:
    assert judge.format_cudnn_version(8700) == "8.7.0"
    assert judge.format_cudnn_version(90100) == "9.1.0"
    assert judge.format_nccl_version((2, 21, 5)) == "2.21.5"
    assert judge.format_nccl_version(2708) == "2.7.8"
    assert judge.format_nccl_version(21905) == "2.19.5"


# ------------------------------------------------------------------ numerics, collectives


def test_conv_mismatch_is_judged() -> None:
    good = {"forward": 3e-4, "grad_input": 2e-4, "grad_weight": 4e-4}
    bad = {**good, "grad_weight": 2e-2}
    result = judge.judge_conv(
        "cudnn_conv2d", "cuda", [("tf32", good), ("fp32", bad)], "cuDNN 9.1.0"
    )
    assert result.status == common.FAIL
    assert "disagrees with the float64 CPU reference in fp32" in result.detail
    assert "grad_weight 2.0e-02" in result.detail
    assert result.value == "cuDNN 9.1.0"
    assert judge.judge_conv("c", "cuda", [("tf32", good)], None).status == common.PASS


def test_nan_error_never_passes() -> None:
    ok, _ = judge.compare_errors({"forward": math.nan}, 1.0)
    assert not ok
    assert judge.judge_matmul("bf16", 500.0, math.nan, 8192, "").status == common.FAIL


def test_allreduce_wrong_sum() -> None:
    per_rank = {0: (5.0, 5.0), 1: (5.0, 5.0), 2: (6.0, 6.0)}
    result = judge.judge_allreduce("nccl_allreduce", "nccl", 3, per_rank, None, "NCCL 2.21.5")
    assert result.status == common.FAIL
    assert "gave the wrong sum" in result.detail
    assert "rank 0 holds 5" in result.detail and "rank 2" not in result.detail
    assert "expected 6 = 1+...+3" in result.detail
    assert "NCCL 2.21.5" in result.detail


def test_allreduce_missing_rank_and_error() -> None:
    missing = judge.judge_allreduce("gloo_allreduce", "gloo", 2, {0: (3.0, 3.0)}, None, None)
    assert missing.status == common.FAIL and "rank 1 reported no result" in missing.detail
    err = judge.judge_allreduce(
        "nccl_allreduce", "nccl", 2, {}, "NCCL error: unhandled system error", None
    )
    assert err.status == common.FAIL and "failed: NCCL error: unhandled system error" in err.detail
    ok = judge.judge_allreduce(
        "gloo_allreduce", "gloo", 2, {0: (3.0, 3.0), 1: (3.0, 3.0)}, None, None
    )
    assert ok.status == common.PASS and ok.value == "sum 3"


def test_throughput_bandwidth_memory_loader_failures() -> None:
    assert judge.judge_matmul("fp16", 700.0, 1e-3, 8192, "").status == common.PASS
    assert judge.judge_matmul("fp16", 700.0, 0.5, 8192, "").status == common.FAIL
    assert judge.judge_matmul("tf32", 0.0, 1e-4, 8192, "").status == common.FAIL
    wrong = judge.judge_bandwidth(True, 50.0, False, 256 << 20)
    assert (
        wrong.status == common.FAIL
        and "arrived wrong" in wrong.detail
        and wrong.name == "h2d_pinned"
    )
    assert judge.judge_bandwidth(False, 20.0, True, 256 << 20).status == common.PASS
    gib = 1 << 30
    short = common.MemoryResult(
        0, 100 * gib, 141 * gib, 90 * gib, 40 * gib, False, "OutOfMemoryError: x"
    )
    full = common.MemoryResult(1, 100 * gib, 141 * gib, 90 * gib, 90 * gib, True)
    mem = judge.judge_memory([full, short], 0.9)
    assert mem.status == common.FAIL and "GPU 0: 40.0 of 100.0 GiB free" in mem.detail
    assert "OutOfMemoryError" in mem.detail
    assert judge.judge_memory([full], 0.9).status == common.PASS
    loader = common.LoaderResult(15, 16, [], 3, 1.0, 480)
    bad = judge.judge_dataloader("dataloader_pinned", loader, 2, True, "")
    assert "15 of 16 batches arrived" in bad.detail and "3 batches were not in pinned" in bad.detail
    assert "--shm-size" in judge.shm_hint(
        "DataLoader worker (pid 7) is killed by signal: Bus error"
    )


# ------------------------------------------------------------------ output and options


def test_no_gpu_is_one_line() -> None:
    line = judge.no_gpu_line(common.DriverInfo(None, "none"), "2.13.0+cpu", None)
    assert "\n" not in line and "no NVIDIA GPU" in line and "--cpu-only" in line


def test_table_and_summary() -> None:
    results = [
        common.CheckResult("matmul_bf16", common.PASS, "fine", 812.345, "TFLOP/s"),
        common.CheckResult("h2d_pinned", common.SKIP, "needs a working CUDA device"),
    ]
    out = io.StringIO()
    table = report.Table(common.GPU_CHECKS, out)
    table.header(["title"])
    for r in results:
        table.row(r)
    text = out.getvalue()
    assert "812.3 TFLOP/s" in text and "SKIP" in text
    assert not report.overall_ok(results)  # a skip is not a pass
    assert report.summary_line(results).startswith("validate-cuda: FAIL: 2 checks, 1 passed")


@pytest.mark.parametrize(
    "argv",
    [["--bogus"], ["--memory-fraction", "1.5"], ["--matmul-size", "8"], ["--inject-fault", "x"]],
)
def test_bad_options_raise_usage_error(argv: list[str]) -> None:
    with pytest.raises(common.UsageError):
        cli.parse_args(argv)


def test_report_written_or_one_line(tmp_path: Path) -> None:
    data = report.build_report(
        "cpu-only", ("11.8", "default"), {}, [common.CheckResult("t", "pass", "")]
    )
    path = tmp_path / "sub" / "r.json"
    assert report.write_report(data, path, explicit=True).endswith(str(path))
    assert json.loads(path.read_text())["passed"] is True
    blocker = tmp_path / "file"
    blocker.write_text("")
    line = report.write_report(data, blocker / "r.json", explicit=True)
    assert "report not written" in line and "\n" not in line


def test_one_driver_table_and_version_rule_for_the_banner_too(monkeypatch) -> None:
    assert drivers.version_tuple("520.61.05") == (520, 61, 5)
    assert drivers.version_tuple("520.61.05-rc") == (520, 61, 5)  # trailing text ends it
    assert drivers.version_tuple("560.x") == (560,) and drivers.version_tuple("") == ()
    banner = importlib.util.spec_from_file_location(
        "banner_for_drivers", ROOT / "docker" / "start" / "banner.py"
    )
    assert banner is not None and banner.loader is not None
    module = importlib.util.module_from_spec(banner)
    monkeypatch.setitem(sys.modules, "banner_for_drivers", module)  # for its dataclasses
    banner.loader.exec_module(module)
    assert module.drivers is drivers and drivers.MIN_DRIVER["11.8"] == "520.61.05"
    assert module.version_tuple is drivers.version_tuple
