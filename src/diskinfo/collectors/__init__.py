"""Collectors: each reads one source and fills its part of an IntervalRecord.

They follow diskinfo.monitor.Collector: `start()` takes the baseline, `fill(record)` the
interval's figures, `stop()` releases. Bad data becomes a warning in `record.warnings`.
"""
