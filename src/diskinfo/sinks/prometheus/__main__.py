"""`python -m diskinfo.sinks.prometheus > table`: the metrics table of docs/metrics.md."""

from diskinfo.sinks.prometheus.metrics import markdown_table

print(markdown_table(), end="")
