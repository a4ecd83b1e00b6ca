"""Train from `diskinfo pack` shards, with the data-wait of the loop reported to diskinfo.

    diskinfo pack /workspace/data/train /workspace/data/train-shards --readers 64
    python examples/train_shards.py /workspace/data/train-shards --workers 8 --epochs 2
    torchrun --nproc-per-node 8 examples/train_shards.py /workspace/data/train-shards
    diskinfo tune examples/train_shards.py:make_dataset     # DATA=/workspace/data/train-shards

`--reader webdataset` reads the same shards with the `webdataset` library instead of
diskinfo.shards; both split shards over DataLoader workers and torchrun ranks.
Images (jpg/png/webp) are decoded with Pillow; any other payload is used as raw bytes.
"""

from __future__ import annotations

import argparse
import functools
import io
import os
import time

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

try:  # the two-line data-wait hook (diskinfo.torch); training works without it
    from diskinfo.torch import watch
except ImportError:

    def watch(loader):  # type: ignore[no-redef]
        return loader


SIZE = 64  # images are resized to SIZE x SIZE; raw payloads are cut or padded to SIZE*SIZE*3
IMAGE_EXTS = ("jpg", "jpeg", "png", "webp")


def to_tensor(sample: dict) -> tuple[torch.Tensor, int]:
    """One sample dict (webdataset layout: extension -> bytes) to (C,H,W float tensor, label)."""
    label = int(sample.get("cls", b"0"))
    ext = next((e for e in IMAGE_EXTS if e in sample), None)
    if ext is not None:
        from PIL import Image

        image = Image.open(io.BytesIO(sample[ext])).convert("RGB").resize((SIZE, SIZE))
        pixels = torch.frombuffer(bytearray(image.tobytes()), dtype=torch.uint8)
    else:
        payload = next(v for k, v in sample.items() if not k.startswith("__") and k != "cls")
        raw = bytearray(payload[: SIZE * SIZE * 3].ljust(SIZE * SIZE * 3, b"\0"))
        pixels = torch.frombuffer(raw, dtype=torch.uint8)
    return pixels.view(SIZE, SIZE, 3).permute(2, 0, 1).float().div(255), label


def dataset(path: str, reader: str, seed: int):
    if reader == "webdataset":
        import webdataset as wds

        from diskinfo.shards import class_values, with_class
        from diskinfo.shards.pack import read_manifest

        manifest = read_manifest(path)
        urls = [os.path.join(path, s["name"]) for s in manifest["shards"]]
        data = wds.WebDataset(
            urls, shardshuffle=len(urls), seed=seed, nodesplitter=wds.split_by_node
        ).shuffle(1000)
        classes = class_values(manifest)
        if classes is not None:  # the class in the keys (pack's default): no cls member
            data = data.map(functools.partial(with_class, classes=classes))
        return data.map(to_tensor)
    from diskinfo.shards import ShardDataset

    # training defaults: shard order reshuffled per epoch, a 1,000-sample shuffle buffer;
    # under torchrun every rank gets the same number of batches (no hang at the epoch's end)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    return ShardDataset(path, transform=to_tensor, seed=seed, even="drop" if distributed else None)


def make_dataset(shards: str | None = None):
    """For `diskinfo tune examples/train_shards.py:make_dataset`: the shards in $DATA."""
    return dataset(shards or os.environ["DATA"], "diskinfo", 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shards", help="a `diskinfo pack` DEST directory")
    parser.add_argument("--reader", choices=["diskinfo", "webdataset"], default="diskinfo")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    data = dataset(args.shards, args.reader, args.seed)
    loader = watch(  # data-wait vs. step time -> `diskinfo watch` -> verdicts
        DataLoader(
            data,
            batch_size=args.batch_size,
            num_workers=args.workers,
            pin_memory=device == "cuda",
            persistent_workers=args.workers > 0,
            prefetch_factor=4 if args.workers > 0 else None,
        )
    )
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, stride=2),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(4),
        torch.nn.Flatten(),
        torch.nn.Linear(256, args.classes),
    ).to(device)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(args.epochs):
        if hasattr(data, "set_epoch"):
            data.set_epoch(epoch)  # a new shard order each epoch
        start, seen = time.monotonic(), 0
        for images, labels in loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True) % args.classes
            loss = F.cross_entropy(model(images), labels)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            seen += len(labels)
        rate = seen / (time.monotonic() - start)
        print(f"epoch {epoch}: {seen} samples, {rate:,.0f} samples/s, loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
