"""Analysis: pure functions of interval records (verdicts, pressure, baselines)."""
