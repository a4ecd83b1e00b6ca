"""Which NVIDIA driver each CUDA release needs, and reading driver versions (stdlib only).

The start banner (docker/start/banner.py) imports this module too: one table, one
`version_tuple`."""

from __future__ import annotations

import re

# Minimum Linux x86_64 driver of each CUDA toolkit's GA release (NVIDIA's CUDA release notes,
# "CUDA Toolkit and Corresponding Driver Versions"). Older drivers run some builds only through
# minor-version compatibility, without PTX JIT: not what a prebuilt image promises.
MIN_DRIVER: dict[str, str] = {
    "11.0": "450.51.05",
    "11.1": "455.23",
    "11.2": "460.27.03",
    "11.3": "465.19.01",
    "11.4": "470.42.01",
    "11.5": "495.29.05",
    "11.6": "510.39.01",
    "11.7": "515.43.04",
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
}
# CUDA 11.x code runs from this driver through minor-version compatibility, with limits.
MIN_DRIVER_COMPAT = "450.80.02"
DRIVER_SOURCES = "NVML, /proc/driver/nvidia/version, nvidia-smi, libcuda"


def version_tuple(text: str) -> tuple[int, ...]:
    """'520.61.05' -> (520, 61, 5); a part's trailing text ends the tuple ('520.61.05-rc' ->
    (520, 61, 5)), and so does a part without leading digits."""
    parts: list[int] = []
    for part in text.strip().split("."):
        match = re.match(r"\d+", part)
        if match is None or not part.isascii():
            break
        parts.append(int(match[0]))
        if match.end() != len(part):
            break
    return tuple(parts)


def min_driver_for(cuda: str) -> tuple[str, str] | None:
    """(minimum driver, CUDA release it is known for): the newest known release <= cuda."""
    known = [c for c in MIN_DRIVER if version_tuple(c) <= version_tuple(cuda)]
    if not known:
        return None
    release = max(known, key=version_tuple)
    return MIN_DRIVER[release], release


def min_drivers(cuda: str) -> tuple[str, str]:
    """(driver an image built for `cuda` needs, the oldest one minor-version compatibility
    runs some of its code from): 11.8 -> 520.61.05 and 450.80.02, 12.8 -> 570.26 and 525.60.13."""
    found = min_driver_for(cuda)
    needed = found[0] if found else MIN_DRIVER["11.8"]
    major = version_tuple(cuda)[:1] or (11,)
    compat = MIN_DRIVER.get(f"{major[0]}.0") if major[0] >= 12 else None
    return needed, compat or MIN_DRIVER_COMPAT


def parse_proc_driver_version(text: str) -> str | None:
    """Driver version from /proc/driver/nvidia/version (proprietary and open kernel modules)."""
    for line in text.splitlines():
        if line.startswith("NVRM version:"):
            for token in line.split():
                if re.fullmatch(r"\d+\.\d+(?:\.\d+)?", token):
                    return token
    return None


def parse_smi_driver_version(text: str) -> str | None:
    """First line of `nvidia-smi --query-gpu=driver_version --format=csv,noheader`."""
    for line in text.splitlines():
        token = line.strip()
        if token:
            return token if re.fullmatch(r"\d+\.\d+(?:\.\d+)?", token) else None
    return None


def format_cuda_api_version(value: int) -> str:
    """cuDriverGetVersion / NVML integer (12020) -> '12.2'."""
    return f"{value // 1000}.{value % 1000 // 10}"
