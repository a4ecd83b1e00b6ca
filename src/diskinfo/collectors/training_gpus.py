"""Which GPUs the training uses: the verdict judges those, never a GPU nobody in it uses.

An 8-GPU node with training on one would otherwise be judged by its most idle GPU. The hints,
strongest first (docs/gpu.md, "Which GPUs are the training's"):

1. wrapper: the UUIDs `diskinfo.torch.watch` publishes: the devices torch itself uses in each
   training process (a DDP run publishes every rank's);
2. nvml-pids: NVML's per-GPU process lists holding a PID of the training's process tree, where
   NVML's PIDs are ours (NVML reports the host's PIDs; inside a container with its own PID
   namespace they name other processes, so they are not compared there);
3. visible-devices: CUDA_VISIBLE_DEVICES as the container sets it for every program in it
   narrows the candidates;
4. memory: of the candidates, those some process holds a context on (NVML lists one) or that
   hold memory or run kernels: in a container this is the GPUs the container was given and
   uses. On a node shared by containers that were all given every GPU it may count another
   container's GPU; the wrapper's UUIDs do not.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from diskinfo.record import GpuFigures
from diskinfo.thresholds import GPU_IN_USE_PCT

MEM_IN_USE_MB = 256.0  # a CUDA context alone takes more; an idle GPU holds a few MiB


@dataclass
class Hints:
    wrapper_uuids: Collection[str] = ()
    tree_pids: Collection[int] = ()
    nvml_pids: Mapping[int, list[int] | None] = field(default_factory=dict)  # GPU index -> PIDs
    pids_are_ours: bool = False
    visible_devices: str | None = None  # CUDA_VISIBLE_DEVICES of the container


def _bare(uuid: str) -> str:
    return uuid.lower().removeprefix("gpu-").removeprefix("mig-")


def visible(gpus: list[GpuFigures], value: str | None) -> list[GpuFigures] | None:
    """The GPUs CUDA_VISIBLE_DEVICES lets a process use (indices, or UUIDs and their unique
    prefixes); None where it is unset or names nothing known (then it narrows nothing)."""
    if value is None:
        return None
    chosen: list[GpuFigures] = []
    for item in (i.strip() for i in value.split(",")):
        if not item:
            continue
        if item.lstrip("-").isdigit():
            if int(item) < 0:  # CUDA stops at the first invalid index
                break
            chosen += [g for g in gpus if g.index == int(item)]
        else:
            chosen += [g for g in gpus if g.uuid and _bare(g.uuid).startswith(_bare(item))]
    return chosen if chosen or value.strip() in ("", "-1") else None


def used(g: GpuFigures, pids: list[int] | None) -> bool:
    return bool(pids) or g.mem_used_mb >= MEM_IN_USE_MB or g.util_max >= GPU_IN_USE_PCT


def mark(gpus: list[GpuFigures], hints: Hints) -> None:
    """Set each GPU's `training` and `training_by` from the strongest hint that applies."""
    if not gpus:
        return
    wrapper = {_bare(u) for u in hints.wrapper_uuids}
    if wrapper and any(_bare(g.uuid) in wrapper for g in gpus if g.uuid):
        _set(gpus, {g.index for g in gpus if g.uuid and _bare(g.uuid) in wrapper}, "wrapper")
        return
    tree = set(hints.tree_pids)
    if hints.pids_are_ours and tree:
        ours = {i for i, pids in hints.nvml_pids.items() if pids and tree.intersection(pids)}
        if ours:
            _set(gpus, ours, "nvml-pids")
            return
    candidates = visible(gpus, hints.visible_devices)
    by = "visible-devices" if candidates is not None else "memory"
    pool = candidates if candidates is not None else gpus
    _set(gpus, {g.index for g in pool if used(g, hints.nvml_pids.get(g.index))}, by)


def _set(gpus: list[GpuFigures], indices: set[int], by: str) -> None:
    for g in gpus:
        g.training = g.index in indices
        g.training_by = by
