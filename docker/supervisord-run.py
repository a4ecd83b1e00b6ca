"""supervisord as PID 1, exiting with the training command's exit code.

supervisord itself always exits 0, but `docker run IMAGE cmd` must end with cmd's code. So this
runs supervisord's own main() in this process (PID 1 keeps receiving `docker stop`'s SIGTERM and
reaping orphans), and when it returns, exits with the status run-train.sh recorded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from supervisor import supervisord

STATE = Path(os.environ.get("STARTUP_STATE_DIR", "/run/pytorch-cuda"))


def exit_code(state: Path = STATE) -> int:
    """The training command's status; 0 when there was none; 137 if it never reported (SIGKILL)."""
    try:
        return int((state / "train" / "exit").read_text().strip())
    except (OSError, ValueError):
        return 137 if (state / "train.args").exists() else 0


if __name__ == "__main__":
    supervisord.main(sys.argv[1:])
    sys.exit(exit_code())
