#!/usr/bin/env bash
# Docker HEALTHCHECK: healthy only when every service this container started is RUNNING in
# supervisord and, when enabled, Jupyter answers on its /api.
set -uo pipefail
state=${STARTUP_STATE_DIR:-/run/pytorch-cuda}
[ -r "$state/services" ] || { echo "starting"; exit 1; }
status=$(supervisorctl -c /etc/pytorch-cuda/supervisord.conf status 2>&1)
rc=0
while read -r service; do
  if ! grep -qE "^$service +RUNNING" <<<"$status"; then
    echo "$service is not running: $(grep -E "^$service " <<<"$status")"
    rc=1
  fi
done <"$state/services"
if grep -qx jupyter "$state/services" \
  && ! curl -fsS -o /dev/null --max-time 3 "http://127.0.0.1:${JUPYTER_PORT:-8888}/api"; then
  echo "jupyter does not answer on port ${JUPYTER_PORT:-8888}"
  rc=1
fi
exit "$rc"
