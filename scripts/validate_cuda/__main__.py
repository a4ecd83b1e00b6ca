"""`python3 -m validate_cuda` (from scripts/) and the `validate-cuda` launcher."""

from __future__ import annotations

import sys

from .cli import main
from .common import PROG


def run() -> int:
    try:
        return main()
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(run())
