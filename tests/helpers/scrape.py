"""Reading the exporter as Prometheus does, once for every test tier: a whole request over HTTP
(`get`), how long one whole scrape takes (`seconds`), and the scraped text as families or as
samples keyed by name and labels."""

from __future__ import annotations

import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def get(port: int, path: str = "/metrics", timeout: float = 5) -> tuple[int, str, str]:
    """(status, Content-Type, body) of one request; HTTP errors are answers too."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read().decode()


def seconds(port: int, path: str = "/metrics", timeout: float = 10, must: bytes = b"") -> float:
    """Seconds one whole scrape took; fails on anything but a 200 with a body (holding `must`)."""
    start = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as reply:
        body = reply.read()
        assert reply.status == 200 and body and must in body
    return time.monotonic() - start


def families(text: str) -> dict[str, object]:
    """The scraped text's metric families by name."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample's value by (sample name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
