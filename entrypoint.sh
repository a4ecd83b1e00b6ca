#!/usr/bin/env bash
# Prepare the container as root, then hand over to supervisord, which runs sshd, JupyterLab,
# the diskinfo monitor and the training command (this script's arguments, kept verbatim).
#
# Each step lives in init.d/NN-name.sh and is sourced in lexical order, so steps share
# variables (NB_USER, the *_ENABLE flags) and stay small. A step that finds bad input calls
# `startup_die MESSAGE`: one clear line and a non-zero exit, before any service starts.
set -euo pipefail

# Every setting with a default is the Dockerfile's ENV, the one place that defines it: no
# script repeats a default. Run outside the image, say what is missing.
: "${PYTORCH_CUDA_LIB:?not set: the image sets it (Dockerfile ENV)}"
: "${STARTUP_STATE_DIR:?not set: the image sets it (Dockerfile ENV)}"

# Without root (docker run --user, apptainer run, ch-run, rootless podman's --userns=keep-id)
# or on a read-only image (docker run --read-only, where root cannot prepare anything): no
# service, the command beside the monitor through `diskinfo run`, as it is run under pyxis or
# `apptainer exec`. unprivileged.sh says what is off and never touches a root-only step.
if [ "$(id -u)" != 0 ] || [ ! -w /etc ]; then
  exec "$PYTORCH_CUDA_LIB/start/unprivileged.sh" "$@"
fi

# Root never works in a folder NB_USER can write: Docker starts us in the image's WORKDIR,
# /workspace, where `python3 -c` would import NB_USER's secrets.py. Every start-up step,
# supervisord and each root program it starts inherit this directory (root-env.sh says why).
cd /
# shellcheck source=docker/shared/root-env.sh
. "$PYTORCH_CUDA_LIB/shared/root-env.sh"

# A previous start of the same container (docker restart) leaves state behind.
rm -rf "$STARTUP_STATE_DIR"
mkdir -p "$STARTUP_STATE_DIR"
chmod 0755 "$STARTUP_STATE_DIR"

# Root's PATH keeps only directories NB_USER cannot write; NB_USER's programs get the PATH they
# were given back (NB_USER_PATH, use_user_venv in user-env.sh).
export NB_USER_PATH=$PATH
PATH=$(root_path "$PATH" 2>"$STARTUP_STATE_DIR/path-dropped")
export PATH
while IFS= read -r dropped; do
  echo "WARNING[$(date -u '+%Y-%m-%d %H:%M:%S')] PATH entry $dropped is left out for root's" \
    "programs: NB_USER could write there (NB_USER's programs still have it)" \
    | tee -a "$STARTUP_STATE_DIR/startup.log" >&2
done <"$STARTUP_STATE_DIR/path-dropped"
rm -f "$STARTUP_STATE_DIR/path-dropped"
unset dropped

# `docker run IMAGE jupyter lab [OPTIONS]` (jupyter/docker-stacks' way to ask for a server)
# asks for what this image serves already: it is taken as that request, and the container
# runs its services without a training command (40-jupyter.sh says so). Run as a training
# command, a second JupyterLab met the image's own Jupyter configuration and ended the
# container with "token file ''".
jupyter_words=0
export JUPYTER_AS_COMMAND=""  # never `docker run -e`'s: set here alone, unset by 40-jupyter.sh
command_name=${1:-}
case "${command_name##*/}" in  # by name, with or without its path (/opt/venv/bin/jupyter lab)
  jupyter) [[ ${2:-} =~ ^(lab|notebook|server)$ ]] && jupyter_words=2 ;;
  jupyter-lab | jupyter-notebook | jupyter-server | start-notebook.sh | start-notebook.py) jupyter_words=1 ;;
esac
if [ "$jupyter_words" -gt 0 ]; then
  JUPYTER_AS_COMMAND="$*"
  shift "$#"
fi
unset jupyter_words command_name

# The training command: one NUL-terminated argument after another, so that no shell and no
# supervisord %(...)s expansion ever re-parses it; run-train.sh reads it back as an array.
if [ "$#" -gt 0 ]; then
  printf '%s\0' "$@" >"$STARTUP_STATE_DIR/train.args"
  export TRAIN_ENABLE=1
else
  export TRAIN_ENABLE=0
fi

startup_die() {
  if declare -F startup_log >/dev/null; then
    startup_log ERROR "$*"
  else
    echo "ERROR $*" >&2
  fi
  exit 1
}

# Steps run as root: each must be root's and writable by nobody else, or it is refused.
for step in "$PYTORCH_CUDA_LIB"/start/init.d/*.sh; do
  [ -r "$step" ] || continue
  if [ -L "$step" ] || [ "$(stat -c %u "$step")" != 0 ] || [ -n "$(find "$step" -maxdepth 0 -perm /022)" ]; then
    startup_die "refusing to run start-up step $step: it is not root's alone (owner or mode changed)"
  fi
  # shellcheck source=/dev/null
  . "$step"
done
unset step

# What the health check expects to be RUNNING.
{
  echo diskinfo
  if [ "${SSHD_ENABLE:-0}" = 1 ]; then echo sshd; fi
  if [ "$JUPYTER_ENABLE" = 1 ]; then echo jupyter; fi
} >"$STARTUP_STATE_DIR/services"

# supervisord's own log: fd 3 (logfile=/dev/fd/3 in supervisord.conf) is a pipe to log-tee.py
# as NB_USER, so root never opens supervisord.log by name. supervisord keeps fds 3 and 4 open
# for itself (it closes from 5) and closes them in the programs it starts.
startup_log_close
exec 3> >(exec "${AS_NB_USER[@]}" \
  python3 -I "$PYTORCH_CUDA_LIB/shared/log-tee.py" --no-stdout "$LOG_DIR/supervisord.log")

# supervisord becomes PID 1; it exits with the training command's exit code (see the runner).
exec python3 -I "$PYTORCH_CUDA_LIB/run/supervisord-run.py" -n -c /etc/pytorch-cuda/supervisord.conf
