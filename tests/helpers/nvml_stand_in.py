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

# A loop whose batches take `wait` of each wall-clock second to arrive and whose step takes
# the rest, lined up with the stand-in's pattern (phase from the Unix epoch): the GPU runs
# while the loop steps and idles while it waits.
TRAIN = r"""
import sys, time
from pathlib import Path
import diskinfo.torch

Path(sys.argv[1]).write_text(str(__import__("os").getpid()))
Path("/proc/self/comm").write_text("trainer")  # what the scenario's processes= names
wait, seconds = float(sys.argv[2]), float(sys.argv[3])

def until(phase):
    now = time.time()
    time.sleep((phase - now % 1.0) % 1.0 or 1.0)

def batches():
    while True:
        if wait >= 0.01:
            until(wait)  # the data arrives `wait` into each second
        yield 0

end = time.monotonic() + seconds
for _ in diskinfo.torch.watch(batches()):
    if time.monotonic() > end:
        break
    if wait >= 0.01:
        until(0.0)  # the step runs to the end of the second
    else:
        time.sleep(0.2)
sys.exit(int(sys.argv[4]))
"""


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
