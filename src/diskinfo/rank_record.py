"""One rank of a distributed job in the interval record (`LoaderFigures.ranks`): a module of
its own beside diskinfo.record, which re-exports it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RankFigures:
    """One rank of a distributed job on this node over one interval: its own data wait and
    step, which the node's sum hides (a node runs one rank per GPU), and who it is."""

    rank: int
    world_size: int
    job_id: str = ""  # shared by every rank of the job (loader_state.LoaderCounters.job_id)
    node: str = ""  # the node's name as the scheduler knows it
    local_rank: int | None = None
    pid: int = 0
    batches: int = 0
    wait_s: float = 0.0
    step_s: float = 0.0
    wait_share: float = 0.0  # wait / (wait + step), 0..1
