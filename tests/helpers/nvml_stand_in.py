"""The NVML stand-in (tests/nvml-stand-in/libnvidia-ml.c): built with gcc on first use, loaded
by nvidia-ml-py through LD_LIBRARY_PATH, driven by a scenario file (its header says how)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "nvml-stand-in" / "libnvidia-ml.c"
LIBRARY = ROOT / "build" / "nvml-stand-in" / "libnvidia-ml.so.1"


def library() -> Path:
    """The built library (rebuilt when the source is newer), as `make nvml-stand-in` builds it."""
    if LIBRARY.exists() and LIBRARY.stat().st_mtime >= SOURCE.stat().st_mtime:
        return LIBRARY
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("gcc is needed to build the NVML stand-in (apt-get install gcc)")
    LIBRARY.parent.mkdir(parents=True, exist_ok=True)
    tmp = LIBRARY.with_suffix(f".{os.getpid()}.tmp")
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-o", str(tmp), str(SOURCE), "-lm"],
        check=True,
    )
    tmp.replace(LIBRARY)  # atomic: parallel builders never load half a file
    return LIBRARY


def environment(scenario: Path, lib_dir: Path | None = None) -> dict[str, str]:
    """Variables that make nvidia-ml-py load the stand-in with `scenario`."""
    lib_dir = lib_dir if lib_dir is not None else library().parent
    return {"LD_LIBRARY_PATH": str(lib_dir), "NVML_STAND_IN_SCENARIO": str(scenario)}
