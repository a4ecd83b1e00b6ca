"""prometheus_client as the reference for the exporter's own text format: the same families
rendered by its `generate_latest`, to compare with diskinfo's writer byte for byte."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from diskinfo.sinks.prometheus.exposition import Family


def _metric(fam: Family) -> Metric:
    kind = CounterMetricFamily if fam.kind == "counter" else GaugeMetricFamily
    metric = kind(fam.name, fam.help, labels=fam.labels)
    for values, value in fam.samples:
        metric.add_metric(list(values), value)
    return metric


def reference_text(families: Iterable[Family]) -> str:
    """What prometheus_client writes for these families."""
    metrics = [_metric(f) for f in families]

    class Fixed:
        def collect(self) -> list[Metric]:
            return metrics

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    return generate_latest(registry).decode()
