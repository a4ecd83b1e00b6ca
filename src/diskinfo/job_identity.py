"""Which rank of which distributed job this training process is, for the loader state
(`diskinfo.torch`'s publisher thread reads it; docs/cluster.md, "The job's verdict")."""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

from diskinfo import loader_state


def _env_int(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


def job_identity() -> dict[str, Any]:
    """Which rank of which job this process is: read by the publisher thread, never in the
    loop, and without any collective (get_rank and get_world_size read the process group
    the training initialised). torch.distributed first, as it holds what the training
    actually joined; the launchers' variables (torchrun, srun scripts) until it is
    initialised. Empty outside a distributed job."""
    rank = world = None
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank, world = int(dist.get_rank()), int(dist.get_world_size())
    except Exception:  # a group being torn down must never reach the training loop
        rank = world = None
    if rank is None:
        rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank is None or world is None:
        return {}
    env = os.environ
    if env.get("SLURM_JOB_ID"):
        job = f"slurm-{env['SLURM_JOB_ID']}"
    elif env.get("TORCHELASTIC_RUN_ID", "none") != "none":  # torchrun's default id is "none"
        job = f"elastic-{env['TORCHELASTIC_RUN_ID']}"
    elif env.get("MASTER_ADDR"):
        job = f"master-{env['MASTER_ADDR']}:{env.get('MASTER_PORT', '')}"
    else:
        job = ""
    return {
        "rank": rank,
        "world_size": world,
        "local_rank": _env_int("LOCAL_RANK"),
        "job_id": loader_state.as_name(job),
        "node": loader_state.as_name(env.get("SLURMD_NODENAME") or _hostname()),
    }


def _hostname() -> str:
    return socket.gethostname().split(".")[0]
