# shellcheck shell=bash
# One line format for every start-up step (docker-stacks' "LEVEL[time] message"), written to
# `docker logs` and appended to /workspace/logs/startup.log, so a start that went wrong can be
# read afterwards from the mounted logs as well. Sourced first by entrypoint.sh.
STARTUP_LOG=${STARTUP_LOG:-${LOG_DIR:-/workspace/logs}/startup.log}
# State that later steps and the monitor read (shm size, hook results).
STARTUP_STATE_DIR=${STARTUP_STATE_DIR:-/run/pytorch-cuda}
mkdir -p "$STARTUP_STATE_DIR" "${STARTUP_LOG%/*}" 2>/dev/null || true

# startup_log LEVEL MESSAGE...
startup_log() {
  local level=$1 line
  shift
  line="${level}[$(date -u '+%Y-%m-%d %H:%M:%S')] $*"
  printf '%s\n' "$line" >&2
  printf '%s\n' "$line" >>"$STARTUP_LOG" 2>/dev/null || true
}
