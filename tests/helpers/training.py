"""The user's training script the image tests run: the README's two lines around a DataLoader,
a small CPU model, for a given number of seconds, so that the monitor judges a few intervals
of it. It prints `train.py: N steps, loss X` and exits with its first argument (0 without)."""

from __future__ import annotations


def train_py(seconds: float) -> str:
    return f"""\
import sys
import time
import torch
from torch.utils.data import DataLoader, TensorDataset
import diskinfo.torch

data = TensorDataset(torch.randn(4096, 64), torch.randint(0, 4, (4096,)))
loader = diskinfo.torch.watch(DataLoader(data, batch_size=64, num_workers=0))
model = torch.nn.Linear(64, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
end = time.monotonic() + {seconds:g}
steps = 0
while time.monotonic() < end:
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
        time.sleep(0.01)
print(f"train.py: {{steps}} steps, loss {{loss.item():.3f}}", flush=True)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""
