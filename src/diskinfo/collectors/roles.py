"""Which process of the training tree does what: `main` (the training loop, one per rank),
`worker` (its DataLoader workers), `helper` (multiprocessing's trackers, torch.compile's
workers), `launcher` (shells, torchrun above it), `child`; from snapshots alone, so the rules
are pure functions (docs/verdicts.md, "Processes")."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from diskinfo.collectors.proctree import MAX_PROCESSES, ProcSnapshot

ROLE_ORDER = {"launcher": 0, "main": 1, "worker": 2, "helper": 3, "child": 4}
# multiprocessing's trackers, and torch.compile's pool of compile workers (busy while it
# compiles: no DataLoader worker to judge)
HELPER_MARKERS = ("resource_tracker", "forkserver", "semaphore_tracker", "compile_worker")
LAUNCHERS = {"torchrun", "accelerate", "deepspeed"}  # console scripts: argv[0] or argv[1]
LAUNCHER_MODULES = {
    "torch.distributed.run",
    "torch.distributed.launch",
    "accelerate.commands.launch",
    "deepspeed.launcher.runner",
}


def is_launcher(p: ProcSnapshot) -> bool:
    """torchrun, accelerate launch, deepspeed, `python -m torch.distributed.run`: a Python
    process that starts the training processes and trains nothing itself."""
    argv = p.cmdline.split()[:3]
    if any(os.path.basename(arg) in LAUNCHERS for arg in argv[:2]):  # the script, or python's
        return True
    return len(argv) == 3 and argv[1] == "-m" and argv[2] in LAUNCHER_MODULES


def is_helper(p: ProcSnapshot) -> bool:
    return any(m in p.cmdline for m in HELPER_MARKERS)


def is_python(p: ProcSnapshot) -> bool:
    return "python" in p.name.lower()


def trains(p: ProcSnapshot) -> bool:
    """A Python process that may run a training loop: no launcher, no helper."""
    return is_python(p) and not is_launcher(p) and not is_helper(p)


def loader_worker(p: ProcSnapshot) -> bool:
    """A process a DataLoader may have started: PyTorch names its workers pt_data_worker (the
    kernel keeps "pt_data_worker"'s first 15 bytes, or less), else a Python one."""
    return p.name.startswith("pt_") or (is_python(p) and not is_helper(p))


def assign_roles(
    procs: Iterable[ProcSnapshot], root: int, publishers: Iterable[int] = ()
) -> dict[int, str]:
    """Role per PID. "main": a process that publishes loader figures, else the outermost Python
    processes from the root down that are no launcher (torchrun's ranks, side by side; the
    ranks of a script that spawns them, where they start workers of their own), else the
    root; "worker": children of a main process (DataLoader workers), "helper" for
    multiprocessing's tracker processes; "launcher": the main's ancestors (shell, torchrun);
    "child": everything else."""
    procs = list(procs)
    by_pid = {p.pid: p for p in procs}
    children: dict[int, list[int]] = {}
    for p in procs:
        if p.pid != root:
            children.setdefault(p.ppid, []).append(p.pid)

    mains = {pid for pid in publishers if pid in by_pid}
    if not any(_descends(pid, root, by_pid) for pid in mains):
        # nothing in the root's tree publishes: its training script is found by its shape,
        # beside any publisher that runs outside it (a notebook kernel)
        found = mains
        mains = set()
        level, depth = [root], 0
        while level and not mains and depth < MAX_PROCESSES:
            # breadth first: the outermost Python processes are the training script (one, or
            # one per rank under a launcher)
            mains = {pid for pid in level if pid in by_pid and trains(by_pid[pid])}
            level = [c for pid in level for c in sorted(children.get(pid, []))]
            depth += 1
        # torch.multiprocessing.spawn: the script's spawned children that have DataLoader
        # workers of their own are its ranks; a DataLoader worker starts none
        ranks = {
            child
            for main in mains
            for child in children.get(main, [])
            if trains(by_pid[child])
            and "spawn_main" in by_pid[child].cmdline
            and any(loader_worker(by_pid[g]) for g in children.get(child, []))
        }
        mains = (ranks or mains or {root}) | found
    roles: dict[int, str] = {}
    for main in mains & by_pid.keys():  # the root may be gone already
        roles[main] = "main"
        for child in children.get(main, []):
            if child in mains:
                continue
            roles[child] = "helper" if is_helper(by_pid[child]) else "worker"
        parent = by_pid[main].ppid
        while parent in by_pid and parent not in roles:
            roles[parent] = "launcher"
            if parent == root:
                break
            parent = by_pid[parent].ppid
    for p in procs:
        roles.setdefault(p.pid, "child")
    return roles


def _descends(pid: int, root: int, by_pid: Mapping[int, ProcSnapshot]) -> bool:
    """Whether `pid` is `root` or below it, through the parents in `by_pid`."""
    for _ in range(MAX_PROCESSES):
        if pid == root:
            return True
        p = by_pid.get(pid)
        if p is None:
            return False
        pid = p.ppid
    return False
