# shellcheck shell=bash
# One line format for every start-up step (docker-stacks' "LEVEL[time] message"), written to
# `docker logs` and appended to $LOG_DIR/startup.log, so a start that went wrong can be read
# afterwards from the mounted logs as well. Sourced first by entrypoint.sh.
#
# Root never opens a file by name in the logs directory: NB_USER can plant a symbolic link
# there (to /etc/shadow, into init.d). Until 20-logs.sh has prepared the directory, lines wait
# in root's $STARTUP_STATE_DIR/startup.log; startup_log_open then sends them, and every later
# line, through a pipe to log-tee.py running as NB_USER. append_log does the same for one
# message into another log (sshd.log, jupyter.log).
# Reads: STARTUP_STATE_DIR, PYTORCH_CUDA_LIB (the image's ENV); later NB_UID, NB_GID, LOG_DIR.
STARTUP_LOG_FD=
STARTUP_LOG_PID=

# startup_log LEVEL MESSAGE...: one line whatever MESSAGE holds (a hook's file name is the
# user's): control characters, newlines and escape codes among them, become '?'.
startup_log() {
  local level=$1 text
  shift
  text=$*
  startup_log_text "${level}[$(date -u '+%Y-%m-%d %H:%M:%S')] ${text//[[:cntrl:]]/?}"
}

# startup_log_text TEXT: TEXT as it is (the banner), to docker logs and startup.log.
startup_log_text() {
  printf '%s\n' "$1" >&2
  if [ -n "$STARTUP_LOG_FD" ]; then
    printf '%s\n' "$1" 1>&"$STARTUP_LOG_FD" 2>/dev/null || true
  else
    printf '%s\n' "$1" >>"$STARTUP_STATE_DIR/startup.log" 2>/dev/null || true
  fi
}

# as_nb_user COMMAND...: COMMAND as NB_USER (for anything that touches NB_USER's files);
# "${AS_NB_USER[@]}" COMMAND where a function cannot go (exec, another command's argv).
# 10-user.sh sets the array once NB_UID and NB_GID are final.
as_nb_user() {
  "${AS_NB_USER[@]}" "$@"
}

# startup_log_open: from now on, startup.log is written by NB_USER.
startup_log_open() {
  exec {STARTUP_LOG_FD}> >(exec "${AS_NB_USER[@]}" \
    python3 -I "$PYTORCH_CUDA_LIB/shared/log-tee.py" --no-stdout "$LOG_DIR/startup.log")
  STARTUP_LOG_PID=$!
  cat "$STARTUP_STATE_DIR/startup.log" 1>&"$STARTUP_LOG_FD" 2>/dev/null || true
}

# startup_log_close: end startup.log's writer and reap it here. Left to end on its own, it was
# reaped by supervisord (PID 1 from the next line of entrypoint.sh on), which logged it as an
# "unknown pid": one line too many among the orphans it reaps. At most 5 s: a hook's
# background job that kept the pipe open keeps the writer too, and the start goes on.
startup_log_close() {
  local state tries=50
  [ -n "$STARTUP_LOG_FD" ] || return 0
  exec {STARTUP_LOG_FD}>&-
  STARTUP_LOG_FD=
  while ((tries-- > 0)); do
    read -r _ _ state _ 2>/dev/null <"/proc/$STARTUP_LOG_PID/stat" || return 0
    if [ "$state" = Z ]; then
      wait "$STARTUP_LOG_PID" 2>/dev/null || true
      return 0
    fi
    sleep 0.1
  done
}

# append_log NAME: stdin appended to $LOG_DIR/NAME.log, written as NB_USER.
append_log() {
  as_nb_user python3 -I "$PYTORCH_CUDA_LIB/shared/log-tee.py" --no-stdout "$LOG_DIR/$1.log" || true
}
