#!/usr/bin/env bash
# JupyterLab as NB_USER; port, address and root come from /etc/jupyter/jupyter_server_config.py,
# the token from the file 40-jupyter.sh wrote (never from this program's environment).
set -euo pipefail
unset JUPYTER_TOKEN
export JUPYTER_TOKEN_FILE=${STARTUP_STATE_DIR:-/run/pytorch-cuda}/jupyter-token
cd /workspace
# JUPYTER_ARGS, already split and checked by 40-jupyter.sh: one NUL-terminated argument each.
extra=()
args_file=${STARTUP_STATE_DIR:-/run/pytorch-cuda}/jupyter.args
if [ -s "$args_file" ]; then mapfile -d '' -t extra <"$args_file"; fi
exec jupyter lab --no-browser "${extra[@]}"
