"""The files diskinfo keeps in the log folder (LOG_DIR, `watch --log-dir`), named once for the
sinks that write them, the baseline store, and the image's start-up, which hands exactly these
(and their rotated copies) to NB_USER (docker/start/safe_paths.PROJECT_LOG)."""

from __future__ import annotations

import re

TEXT_LOG = "diskinfo.log"  # sinks/textlog.py
JSONL = "diskinfo.jsonl"  # sinks/jsonl.py
LOCK = "diskinfo.lock"  # sinks/logdir_lock.py: one monitor per folder
BASELINE = "diskinfo-baseline.json"  # analyse/baseline.py, where LOG_DIR is set
ROTATED = (TEXT_LOG, JSONL)  # kept as NAME.1, NAME.2, ... (sinks/rotating.py)

# every name above, with the rotated copies of ROTATED
PATTERN = "|".join(
    [*(re.escape(name) + r"(?:\.\d+)?" for name in ROTATED), re.escape(LOCK), re.escape(BASELINE)]
)
