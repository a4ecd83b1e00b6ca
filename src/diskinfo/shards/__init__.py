"""The shard feature: the format, the reader (ShardDataset) and the writer (`diskinfo pack`).

The reader's public names are loaded on first use, not here: the writer and the CLI import
this package too, and the reader brings torch with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from diskinfo.shards.dataset import (
        Sample,
        ShardDataset,
        ShardError,
        buffer_shuffle,
        class_of,
        class_values,
        consumer,
        dist_initialized,
        read_shard,
        split_name,
        tar_members,
        with_class,
    )

__all__ = [
    "Sample",
    "ShardDataset",
    "ShardError",
    "buffer_shuffle",
    "class_of",
    "class_values",
    "consumer",
    "dist_initialized",
    "read_shard",
    "split_name",
    "tar_members",
    "with_class",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("diskinfo.shards.dataset"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
