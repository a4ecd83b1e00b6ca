"""The files diskinfo keeps in the log folder (LOG_DIR, `watch --log-dir`), named once for the
sinks that write them, the baseline store, and the image's start-up, which hands exactly these
(and their rotated copies) to NB_USER (docker/shared/safe_paths.py, PROJECT_LOG)."""

from __future__ import annotations

import re

# the image's logs folder, where `watch` logs unless told: the Dockerfile's ENV LOG_DIR is
# this (a test compares them); the image's scripts read LOG_DIR, falling back to this
LOG_DIR = "/workspace/logs"
TRAIN_LOG = "train.log"  # the training command's output there (docker/run/run-train.sh)
TUNE = "diskinfo-tune"  # `diskinfo tune`'s PREFIX.json and PREFIX.png there, unless --out
TEXT_LOG = "diskinfo.log"  # sinks/textlog.py
JSONL = "diskinfo.jsonl"  # sinks/jsonl.py
LOCK = "diskinfo.lock"  # logdir_lock.py: one monitor per folder
BASELINE = "diskinfo-baseline.json"  # analyse/baseline.py, where LOG_DIR is set
ROTATED = (TEXT_LOG, JSONL)  # kept as NAME.1, NAME.2, ... (rotating_file.py)

# every name above, with the rotated copies of ROTATED
PATTERN = "|".join(
    [*(re.escape(name) + r"(?:\.\d+)?" for name in ROTATED), re.escape(LOCK), re.escape(BASELINE)]
)
