#!/usr/bin/env bash
# logged.sh NAME COMMAND...: run COMMAND (exec, so supervisord signals it directly) with its
# stdout and stderr appended to $LOG_DIR/NAME.log, rotated at 50 MB with 5 copies kept.
#
# supervisord runs as root, and root must never open a file by name in the logs directory:
# NB_USER can put a symbolic link to /etc/shadow there. So the writer is log-tee.py running as
# NB_USER (dropped with setpriv when we are root, as for sshd; a program supervisord starts
# cannot share the start-up's AS_NB_USER, so it is spelled here). It also copies to our stdout,
# which supervisord sends where the program's stdout_logfile says (NONE: nowhere).
set -euo pipefail
name=$1
shift
lib=${PYTORCH_CUDA_LIB:?not set: the image sets it (Dockerfile ENV)}
log=${LOG_DIR:?not set: the image sets it (Dockerfile ENV)}/$name.log
tee_cmd=(python3 -I "$lib/shared/log-tee.py" "$log")
if [ "$(id -u)" = 0 ]; then
  tee_cmd=(setpriv "--reuid=$NB_UID" "--regid=$NB_GID" --init-groups "${tee_cmd[@]}")
fi
exec > >(exec "${tee_cmd[@]}") 2>&1
exec "$@"
