"""/dev/shm's size, measured here and nowhere else: the start-up check (05-shm.sh), the start
banner, the monitor (`shm_total_mb`, which the verdict holds against SHM_MIN_MB) and
validate-cuda's report all read it through `size_mb`.

`python -m diskinfo.sources.shm` prints the size in whole MB and whether it is under the floor
(`64 small`, `2048 ok`) for the start-up's shell step; exit 3 when /dev/shm is not mounted.
"""

from __future__ import annotations

import os
import sys

PATH = "/dev/shm"
NOT_MOUNTED = 3


def size_mb(path: str = PATH) -> float | None:
    """The filesystem's size in MB (2**20 bytes); None where it cannot be read."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize / 2**20


def main() -> int:
    from diskinfo.thresholds import shm_small  # the floor's one rule

    size = size_mb()
    if size is None:
        return NOT_MOUNTED
    print(f"{size:.0f} {'small' if shm_small(size) else 'ok'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
