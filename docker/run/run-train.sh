#!/usr/bin/env bash
# The training command, run as NB_USER in /workspace by supervisord, or as the calling user in
# the calling folder by `diskinfo run` (no root: HPC runtimes). Its arguments come from
# the NUL-separated file entrypoint.sh wrote, so they reach the program exactly as given to
# `docker run` (no shell, no supervisord expansion). Output goes to /workspace/logs/train.log
# (rotated, TRAIN_LOG_MAX_BYTES and TRAIN_LOG_BACKUPS) and to our stdout, which supervisord
# sends to `docker logs`. The program's PID (not ours: the tee below is no part of the user's
# work) is the root of the process tree the monitor watches; the exit status is recorded for
# the container's exit.
set -uo pipefail
state=${STARTUP_STATE_DIR:?not set: the image sets it (Dockerfile ENV)}
lib=${PYTORCH_CUDA_LIB:?not set: the image sets it (Dockerfile ENV)}
log=${LOG_DIR:?not set: the image sets it (Dockerfile ENV)}/train.log
mapfile -d '' -t args <"$state/train.args"

# supervisord stops the whole process group (stopasgroup): the program gets SIGTERM directly.
# We only note it; a handler (not an ignore) so the program keeps default signal handling.
trap 'stopping=1' TERM INT HUP
stopping=0

fifo=$state/train/output.fifo
rm -f "$fifo" && mkfifo -m 0600 "$fifo"
# We hold the pipe open both ways (fd 4) for as long as the program runs: with a reader always
# there, a tee that dies (kill -9, OOM) never turns the program's next write into EPIPE; the
# pipe only buffers until the next tee reads on. Neither the program nor a tee inherits fd 4
# (the tee's EOF is the program's last writer closing).
exec 4<>"$fifo"
# The tee must outlive the program's last words: it ignores the group's SIGTERM, ends on EOF
# (status 0). Ended any other way while the program runs (kill -9, OOM), a new one reads on
# from the pipe, said once; one that keeps dying gives way to cat: docker logs get every line.
keep_tee() {
  local runs=0 status
  while :; do
    runs=$((runs + 1))
    if [ "$runs" -le 5 ]; then
      (trap '' TERM INT HUP && exec python3 "$lib/shared/log-tee.py" \
        --max-bytes "${TRAIN_LOG_MAX_BYTES:-50M}" --backups "${TRAIN_LOG_BACKUPS:-5}" "$log")
    else
      (trap '' TERM INT HUP && exec cat)
    fi
    status=$?
    [ "$status" = 0 ] && return 0
    if [ "$runs" = 1 ]; then
      echo "[run-train] ERROR: the log tee ended (status $status) while the training runs;" \
        "a new one takes over (lines it held may be missing from $log)" >&2
    fi
  done
}
(trap '' TERM INT HUP && keep_tee) <"$fifo" 4<&- &
tee_pid=$!

# The program gets the -e secrets back (95-secrets.sh kept them out of every service's
# environment); only its own subshell exports them, so the tee above never holds them.
(
  exec 4<&-
  # shellcheck source=/dev/null  # docker/run/user-env.sh
  . "$lib/run/user-env.sh" && use_user_venv  # `pip install` in the command goes to USER_VENV
  if [ -r "$state/user-secrets" ]; then
    while IFS= read -r -d '' secret; do
      [[ ${secret%%=*} =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && export "${secret?}"
    done <"$state/user-secrets"
  fi
  echo "$BASHPID" >"$state/train.pid"  # this subshell's PID is the program's after exec
  exec "${args[@]}"
) >"$fifo" 2>&1 </dev/null
code=$?
exec 4<&-
# The tee ends when the last writer closes the pipe. A background process the program left
# behind may hold it open for hours: give the tee 2 s to drain, then stop waiting for it.
for _ in $(seq 20); do
  kill -0 "$tee_pid" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$tee_pid" 2>/dev/null || wait "$tee_pid" 2>/dev/null
rm -f "$fifo"
echo "$code" >"$state/train/exit"
if [ "$stopping" = 1 ]; then echo "[run-train] stopped by signal, exit status $code" >&2; fi
exit "$code"
