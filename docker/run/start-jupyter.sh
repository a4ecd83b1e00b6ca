#!/usr/bin/env bash
# JupyterLab as NB_USER; port, address, root and authentication come from
# /etc/jupyter/jupyter_server_config.py, the token from the root-owned file 40-jupyter.sh wrote.
#
# Jupyter reads config files (Python it runs, and JSON) from every directory on its config
# path, the user's ~/.jupyter first. Anything NB_USER can write there could set the token to ""
# or turn XSRF checks off at the next restart. So the config directory is the root-owned
# $STARTUP_STATE_DIR/jupyter-config, and JUPYTER_CONFIG_PATH and friends are cleared: only
# root-owned directories remain (/opt/venv/etc/jupyter, /usr/local/etc/jupyter, /etc/jupyter).
# JupyterLab's settings and workspaces stay in ~/.jupyter/lab (JSON data, not configuration).
# The kernels get the -e secrets the training command gets (95-secrets.sh), never the token.
set -euo pipefail
# a stop while starting is a clean end (status 0), as it is once JupyterLab runs: jupyter-lab.py
trap 'exit 0' TERM
state=${STARTUP_STATE_DIR:?not set: the image sets it (Dockerfile ENV)}
token_file=$state/jupyter-token
if [ ! -s "$token_file" ] || [ ! -r "$token_file" ]; then
  echo "start-jupyter: $token_file is missing or empty: Jupyter never runs without a token" >&2
  exit 1
fi
unset JUPYTER_TOKEN JUPYTER_CONFIG_PATH JUPYTER_PREFER_ENV_PATH JUPYTER_NO_CONFIG \
  JUPYTER_PLATFORM_DIRS
export JUPYTER_TOKEN_FILE=$token_file
export JUPYTER_CONFIG_DIR=$state/jupyter-config
export JUPYTERLAB_SETTINGS_DIR=${JUPYTERLAB_SETTINGS_DIR:-$HOME/.jupyter/lab/user-settings}
export JUPYTERLAB_WORKSPACES_DIR=${JUPYTERLAB_WORKSPACES_DIR:-$HOME/.jupyter/lab/workspaces}
if [ -r "$state/user-secrets" ]; then
  while IFS= read -r -d '' secret; do
    [[ ${secret%%=*} =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && export "${secret?}"
  done <"$state/user-secrets"
  unset secret
fi
cd /workspace
# The server runs from the image's environment (its JupyterLab assets are there); kernels
# (kernel.json) and terminals (PATH) use USER_VENV, so `%pip install` works in a notebook.
python=${VIRTUAL_ENV:?not set: the image sets it (Dockerfile ENV)}/bin/python
lib=${PYTORCH_CUDA_LIB:?not set: the image sets it (Dockerfile ENV)}
# shellcheck source=/dev/null  # docker/run/user-env.sh
. "$lib/run/user-env.sh"
use_user_venv
# JUPYTER_ARGS, already split and checked by 01-settings.sh: one NUL-terminated argument each.
extra=()
args_file=$state/jupyter.args
if [ -s "$args_file" ]; then mapfile -d '' -t extra <"$args_file"; fi
exec "$python" "$lib/run/jupyter-lab.py" --no-browser "${extra[@]}"
