#!/usr/bin/env bash
# Docker HEALTHCHECK: healthy only when every service this container started is RUNNING in
# supervisord, the diskinfo monitor is still sampling (its heartbeat is younger than
# 3 x interval + 10 s: a stopped or hung monitor is still "RUNNING") and, when enabled,
# Jupyter answers on its /api.
set -uo pipefail
# Docker runs this as root in the image's WORKDIR, /workspace, with the container's PATH:
# work from / and look commands up only where root can trust them (root-env.sh).
cd / || exit 1
# shellcheck source=docker/shared/root-env.sh
. "${BASH_SOURCE[0]%/*}/../shared/root-env.sh" || exit 1
PATH=$(root_path "$PATH" 2>/dev/null)
state=${STARTUP_STATE_DIR:?not set: the image sets it (Dockerfile ENV)}
# The heartbeat (src/diskinfo/sinks/heartbeat.py): touched by the monitor every 5 s of sampling.
# The file and its folder are the monitor's (NB_USER's): heartbeat-check.py reads it by
# descriptor, never through a link, a FIFO or more than 4 KiB, and `timeout` ends it (and
# whatever it waits on) long before Docker's own 5 s: no check leaves a process behind.
heartbeat_age_check() {
  timeout -k 1 3 python3 -I "${BASH_SOURCE[0]%/*}/heartbeat-check.py" \
    "$DISKINFO_STATE_DIR" "$DISKINFO_INTERVAL"
}
# Without root (docker run --user: `diskinfo run`, no supervisord, no services) healthy is the
# monitor sampling: its heartbeat is in the run's own state folder, from its environment.
if [ "$(id -u)" != 0 ]; then
  monitor=$(pgrep -u "$(id -u)" -o -f '/diskinfo watch ' || true)
  if [ -z "$monitor" ]; then
    echo "diskinfo is not running (starting, or the command runs without it: see the logs)"
    exit 1
  fi
  DISKINFO_STATE_DIR=$(tr '\0' '\n' <"/proc/$monitor/environ" | sed -n 's/^DISKINFO_STATE_DIR=//p')
  heartbeat_age_check
  exit
fi
[ -r "$state/services" ] || { echo "starting"; exit 1; }
status=$(python3 -I -m supervisor.supervisorctl -c /etc/pytorch-cuda/supervisord.conf status 2>&1)
rc=0
while read -r service; do
  if ! grep -qE "^$service +RUNNING" <<<"$status"; then
    echo "$service is not running: $(grep -E "^$service " <<<"$status")"
    rc=1
  fi
done <"$state/services"

if grep -qx diskinfo "$state/services" && ! heartbeat_age_check; then
  rc=1
fi
# The metrics port: NB_USER can kill its monitor and listen there before supervisord starts
# it again (docs/security.md). The monitor supervisord started, told to serve a port (its
# command line: the start-up leaves metrics off when the port was taken before), must hold it.
metrics_holder_check() {
  local pid port uid gid
  pid=$(sed -nE 's/^diskinfo +RUNNING +pid ([0-9]+),.*/\1/p' <<<"$status")
  [[ -n $pid ]] || return 0
  port=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n '/^--metrics-port$/{n;p;q}')
  [[ $port =~ ^[1-9][0-9]{0,4}$ ]] || return 0
  uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
  gid=$(awk '/^Gid:/ { print $2 }' "/proc/$pid/status" 2>/dev/null)
  [[ $uid =~ ^[0-9]+$ && $gid =~ ^[0-9]+$ ]] || return 0
  timeout -k 1 3 setpriv --reuid="$uid" --regid="$gid" --clear-groups \
    python3 -I "${BASH_SOURCE[0]%/*}/metrics-holder-check.py" "$port" "$pid"
}
if grep -qx diskinfo "$state/services" && ! metrics_holder_check; then
  rc=1
fi

if grep -qx jupyter "$state/services" \
  && ! curl -fsS -o /dev/null --max-time 3 "http://127.0.0.1:$JUPYTER_PORT/api"; then
  echo "jupyter does not answer on port $JUPYTER_PORT"
  rc=1
fi
exit "$rc"
