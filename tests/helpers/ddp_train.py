"""A tiny data-parallel training run, one rank per Slurm node (the job-verdict harness).

torch.distributed with gloo on CPU; the rank and world size from srun (SLURM_PROCID,
SLURM_NTASKS), the rendezvous at MASTER_ADDR:MASTER_PORT (the first node's address). Each
rank reads small files from its own node's data device through a DataLoader wrapped by
`diskinfo.torch.watch`; the model is a few thousand parameters, so a step is mostly the
all-reduce and any rank's data wait shows in every rank's step.

--evict drops each file from the page cache after reading it (posix_fadvise), so every read
reaches the device, as with a dataset larger than memory; --step-ms sleeps in each step for the
time a GPU would compute (a sleep leaves this 2-core machine's CPU to the loaders, as a GPU's
kernels would); --worker-cgroup moves the loader's
workers into a cgroup (a CPU quota there starves them, not the training process).
"""

from __future__ import annotations

import argparse
import glob
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

import diskinfo.torch

p = argparse.ArgumentParser()
p.add_argument("--data", required=True)
p.add_argument("--seconds", type=float, required=True)
p.add_argument("--workers", type=int, default=2)
p.add_argument("--batch", type=int, default=8)
p.add_argument("--evict", action="store_true")
p.add_argument("--worker-cgroup", default="")
p.add_argument("--decode-rounds", type=int, default=10)  # ~0.1 ms of CPU per sample
# the accelerator's share of a step, which leaves the CPU free: a sleep stands for it here
p.add_argument("--step-ms", type=float, default=50.0)
a = p.parse_args()

os.environ.setdefault("RANK", os.environ.get("SLURM_PROCID", "0"))
os.environ.setdefault("WORLD_SIZE", os.environ.get("SLURM_NTASKS", "1"))
torch.set_num_threads(1)
torch.manual_seed(0)
dist.init_process_group("gloo")
files = sorted(glob.glob(os.path.join(a.data, "*.bin")))


class Files(Dataset):
    def __len__(self) -> int:
        return len(files)

    def __getitem__(self, i: int):
        fd = os.open(files[i], os.O_RDONLY)
        try:
            raw = os.read(fd, 1 << 20)
            if a.evict:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        x = torch.frombuffer(bytearray(raw[:1024]), dtype=torch.uint8).float()
        for _ in range(a.decode_rounds):  # a little decoding work per sample
            x = torch.tanh(x / 255).cumsum(0) / len(x)
        return x[:64], i % 4


def into_cgroup(_worker: int) -> None:
    if a.worker_cgroup:
        with open(os.path.join(a.worker_cgroup, "cgroup.procs"), "w") as h:
            h.write(f"{os.getpid()}\n")


model = DistributedDataParallel(nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = diskinfo.torch.watch(
    DataLoader(
        Files(),
        batch_size=a.batch,
        shuffle=True,
        num_workers=a.workers,
        persistent_workers=a.workers > 0,
        worker_init_fn=into_cgroup,
    )
)
deadline = time.monotonic() + a.seconds
steps = 0
while time.monotonic() < deadline:
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        time.sleep(a.step_ms / 1000)
        loss.backward()  # the all-reduce: every rank waits for the slowest here
        opt.step()
        steps += 1
        # every rank stops at the same step, agreed without an extra collective per step
        if steps % 8 == 0:
            done = torch.tensor([float(time.monotonic() > deadline)])
            dist.all_reduce(done, op=dist.ReduceOp.MAX)
            if done.item():
                break
    else:
        continue
    break
s = diskinfo.torch.meter().snapshot()
print(
    f"rank={dist.get_rank()} node={os.environ.get('SLURMD_NODENAME')} steps={steps} "
    f"wait_s={s.wait_s:.2f} step_s={s.step_s:.2f}",
    flush=True,
)
# Leave together: a rank that closes its gloo pairs while a peer still reads the last
# all-reduce's chunks breaks that peer ("Connection closed by peer"). Each rank says it is past
# its last collective through the rendezvous store; all go once every rank has said so, and
# the store's host (rank 0) last.
store = dist.distributed_c10d._get_default_store()
world = dist.get_world_size()
store.add("past-last-collective", 1)
while store.add("past-last-collective", 0) < world:
    time.sleep(0.05)
if dist.get_rank() == 0:
    while store.add("left", 0) < world - 1:
        time.sleep(0.05)
else:
    store.add("left", 1)
diskinfo.torch.meter().close()  # the last figures, as atexit would have published them
os._exit(0)  # no teardown of the process group: nothing to wait for any more
