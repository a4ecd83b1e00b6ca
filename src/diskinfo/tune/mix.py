"""How mixed each measured setting's batches are beside a fully shuffled loader, shown next
to its samples/s: what a setting gains in speed and what it costs in mixing, side by side.

A ShardDataset's batch comes whole from one DataLoader worker, which reads its own share of
the shards through its own shuffle buffer, so the mix depends on num_workers as well as on
the dataset's shuffle_buffer and shards (tune changes only the first). The prediction is
ShardDataset.mixing's (diskinfo.shards.mixing), with the labels read once for all the
settings; without labels, pack's order correlation against the samples' key order. A
map-style dataset tune reads through its own shuffled sampler: a fully shuffled loader.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Iterable
from typing import Any

import torch.utils.data

from diskinfo.shards.dataset import consumer, shard_labels
from diskinfo.shards.format import CLASS
from diskinfo.shards.mixing import in_words, mixing, order_correlation
from diskinfo.shards.stream import ShardStream
from diskinfo.tune.runner import Result, Runner

LEGEND = (
    "batch mix: distinct classes per batch / a fully shuffled loader's, for each setting's "
    "num_workers and the dataset's shuffle buffer (ShardDataset.mixing); rho: order\n"
    "correlation with the samples' key order (shards without cls labels; 0: none left); "
    "shuffled: read through tune's shuffled sampler"
)


def annotate(results: list[Result], runner: Runner, limit_s: float) -> None:
    """Set each result's `mix` (None where nothing can be said, or reading the labels took
    more than `limit_s`)."""
    deadline = time.monotonic() + limit_s
    for shards in sorted({r.setting.shards for r in results}):
        rows = [r for r in results if r.setting.shards == shards]
        workers = {r.setting.num_workers for r in rows}
        found = mixes(runner.dataset(shards), runner.batch_size, workers, deadline)
        for r in rows:
            r.mix = found.get(r.setting.num_workers)


def mixes(
    dataset: Any, batch_size: int, workers: Iterable[int], deadline: float | None = None
) -> dict[int, dict[str, Any]]:
    """The mix per num_workers: {} where the dataset's order is not known (an
    IterableDataset other than ShardDataset, shards that cannot be read, labels not read by
    the monotonic `deadline`)."""
    if not isinstance(dataset, ShardStream):
        if isinstance(dataset, torch.utils.data.IterableDataset):
            return {}
        return {w: {"fully_shuffled": True} for w in workers}
    setup = {"batch_size": batch_size, "shuffle_buffer": dataset.shuffle_buffer}
    try:
        labels = shard_labels(dataset, CLASS, deadline)
        if all(value is not None for shard in labels for value in shard):
            out, world = {}, consumer()[1]
            for w in workers:
                m = mixing(dataset, batch_size, w, labels, world)
                out[w] = {**setup, "num_workers": w, "distinct_classes": round(m.distinct, 2),
                          "shuffled_loader": round(m.shuffled, 2), "ratio": round(m.ratio, 3),
                          "batches": m.batches}  # fmt: skip
            return out
        ranks = _key_ranks(shard_labels(dataset, "__key__", deadline))
    except (OSError, ValueError):  # TimeoutError (a large set on slow storage), or a shard
        return {}  # that cannot be read (the measurement said so)
    return {
        w: {
            **setup,
            "num_workers": w,
            "order_correlation": round(order_correlation(dataset, ranks, w), 3),
        }
        for w in workers
    }


def _key_ranks(keys: list[list[Hashable]]) -> list[list[int]]:
    """Each sample's place in the key order of all samples (ties by shard, then position)."""
    flat = sorted((str(key), shard, i) for shard, ks in enumerate(keys) for i, key in enumerate(ks))
    ranks = [[0] * len(ks) for ks in keys]
    for rank, (_, shard, i) in enumerate(flat):
        ranks[shard][i] = rank
    return ranks


def shown(results: list[Result]) -> bool:
    """The table has a `batch mix` column when a setting reads shards: beside a map-style
    dataset alone, every row would say `shuffled`."""
    return any(r.mix is not None and "shuffle_buffer" in r.mix for r in results)


def cell(mix: dict[str, Any] | None) -> str:
    """The table's `batch mix` column."""
    if mix is None:
        return "-"
    if mix.get("fully_shuffled"):
        return "shuffled"
    if "distinct_classes" in mix:
        return f"{mix['distinct_classes']:.1f}/{mix['shuffled_loader']:.1f} cls"
    return f"rho {mix['order_correlation']:+.2f}"


def words(label: str, mix: dict[str, Any] | None) -> str | None:
    """One line on a shard setting's mix (None for any other)."""
    if mix is None or mix.get("fully_shuffled"):
        return None
    return in_words(mix, of=label, order="the samples' key order")
