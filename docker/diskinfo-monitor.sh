#!/usr/bin/env bash
# The diskinfo monitor as supervisord runs it (as NB_USER): the paths that exist among
# DISKINFO_PATHS, watching the training command's process tree through its pid file.
set -euo pipefail
paths=()
# shellcheck disable=SC2086  # DISKINFO_PATHS is a space-separated list by design
for p in ${DISKINFO_PATHS:-/workspace/data /workspace}; do
  if [ -e "$p" ]; then paths+=("$p"); else echo "diskinfo-monitor: skipping $p: not there" >&2; fi
done
[ "${#paths[@]}" -gt 0 ] || paths=(/workspace)
exec diskinfo watch "${paths[@]}" --interval "${DISKINFO_INTERVAL:-5}" \
  --log-dir "${LOG_DIR:-/workspace/logs}" \
  --pid-file "${STARTUP_STATE_DIR:-/run/pytorch-cuda}/train.pid" \
  --metrics-port "${METRICS_PORT:-9101}" --metrics-addr "${METRICS_ADDR:-0.0.0.0}"
