#!/usr/bin/env bash
# The diskinfo monitor as supervisord runs it (as NB_USER), and `diskinfo run` (as the calling
# user, without root; it lists the calling folder too): the paths that exist among
# DISKINFO_PATHS, watching the training command's process tree through its pid file.
set -euo pipefail
paths=()
# DISKINFO_PATHS' entries, as 01-settings.sh split them (':'-separated, spaces kept); an
# empty DISKINFO_PATHS lists none
listed=()
list_file=${STARTUP_STATE_DIR:?not set: the image sets it (Dockerfile ENV)}/diskinfo-paths
if [ -s "$list_file" ]; then mapfile -d '' -t listed <"$list_file"; fi
for p in "${listed[@]}"; do
  if [ -e "$p" ]; then paths+=("$p"); else echo "diskinfo-monitor: skipping $p: not there" >&2; fi
done
[ "${#paths[@]}" -gt 0 ] || paths=(/workspace)
# Its stdout and stderr are docker logs (supervisord.conf), so the console shows only verdicts,
# at a low rate (on change, a summary every few minutes); every figure goes to
# $LOG_DIR/diskinfo.log and diskinfo.jsonl. The image's own diskinfo, by path: a `diskinfo` on
# PATH is NB_USER's environment's (docker/build/user-path), where a `pip install` could change it.
image_venv=${VIRTUAL_ENV:?not set: the image sets it (Dockerfile ENV)}
exec "$image_venv/bin/diskinfo" watch "${paths[@]}" --interval "$DISKINFO_INTERVAL" \
  --log-dir "$LOG_DIR" \
  --pid-file "$STARTUP_STATE_DIR/train.pid" \
  --metrics-port "$METRICS_PORT" --metrics-addr "$METRICS_ADDR" \
  --console verdicts
