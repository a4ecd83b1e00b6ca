"""The start banner for `diskinfo run` (no root, no services: HPC runtimes, docker run --user):
banner.py's lines that hold there (versions, GPUs and driver, /dev/shm), then where the
verdicts and the logs go; no services, ports, token or docker commands.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if __name__ == "__main__":  # run as `python3 -I`: banner.py beside us, and what it imports
    here = Path(__file__).resolve()
    sys.path[:0] = [str(here.parent), str(here.parents[1])]
import banner


def render(facts: banner.Facts) -> list[str]:
    """banner.render's lines up to the services, then the monitor's for this console."""
    lines = []
    for line in banner.render(facts):
        if line.startswith("Services"):
            break
        lines.append(line)
    if facts.shm_small:  # no start-up step warned above, as in a root start
        lines = [line for line in lines if not line.startswith("/dev/shm")] + [
            f"/dev/shm   {facts.shm_mb} MB: too small for DataLoader workers (num_workers > 0):"
            " docker run --shm-size=16g or --ipc=host; other runtimes use the host's"
        ]
    lines.append(
        "Verdicts   on this console when they change, a summary every few minutes and a closing"
        f" Run line; every figure in {facts.logs_dir}/diskinfo.log"
    )
    if facts.metrics_url:
        lines.append(f"Metrics    {facts.metrics_url}")
    if facts.baseline is None and facts.baseline_path:
        lines.append(
            "Baseline   none for this disk yet: measure it once with `diskinfo bench"
            f" DATA_FOLDER` (kept in {facts.baseline_path}; verdicts then compare reads with it)"
        )
    lines.append(
        f"Logs       {facts.logs_dir}/: train.log, diskinfo.log, diskinfo.jsonl,"
        " diskinfo-monitor.log, startup.log"
    )
    return lines


def main() -> int:
    if missing := ", ".join(name for name in banner.IMAGE_ENV if name not in os.environ):
        sys.exit(f"banner: {missing} not set: the image sets them (Dockerfile ENV)")
    env = dict(os.environ, JUPYTER_ENABLE="0", SSHD_ENABLE="0")  # no token, no ssh lines
    print("\n".join(render(banner.gather(env))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
