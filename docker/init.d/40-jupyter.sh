# shellcheck shell=bash
# JupyterLab is always behind a token: JUPYTER_TOKEN, or the file JUPYTER_TOKEN_FILE names, or a
# random one printed once to jupyter.log. The token reaches Jupyter through a file readable only
# by NB_USER, so it is in no other program's environment. JUPYTER_ENABLE=0 turns Jupyter off.
JUPYTER_PORT=${JUPYTER_PORT:-8888}
export JUPYTER_PORT
if [ "${JUPYTER_ENABLE:-1}" = 0 ]; then
  export JUPYTER_ENABLE=0
  startup_log INFO "JupyterLab disabled (JUPYTER_ENABLE=0)"
else
  export JUPYTER_ENABLE=1
  jupyter_token_file=$STARTUP_STATE_DIR/jupyter-token
  if [ -n "${JUPYTER_TOKEN_FILE:-}" ]; then
    [ -r "$JUPYTER_TOKEN_FILE" ] || startup_die "JUPYTER_TOKEN_FILE=$JUPYTER_TOKEN_FILE is not a readable file"
    jupyter_token=$(tr -d '\r\n' <"$JUPYTER_TOKEN_FILE")
    [ -n "$jupyter_token" ] || startup_die "JUPYTER_TOKEN_FILE=$JUPYTER_TOKEN_FILE is empty; Jupyter never runs without a token"
    jupyter_token_origin="from JUPYTER_TOKEN_FILE"
  elif [ -n "${JUPYTER_TOKEN+set}" ]; then
    [ -n "$JUPYTER_TOKEN" ] || startup_die "JUPYTER_TOKEN is empty; Jupyter never runs without a token (unset it for a random one, or JUPYTER_ENABLE=0)"
    jupyter_token=$JUPYTER_TOKEN
    jupyter_token_origin="from JUPYTER_TOKEN"
  else
    jupyter_token=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
    jupyter_token_origin=random
    printf 'Jupyter token (random, shown once; set JUPYTER_TOKEN to choose one): %s\n' \
      "$jupyter_token" >>"$LOG_DIR/jupyter.log"
  fi
  (umask 077 && printf '%s' "$jupyter_token" >"$jupyter_token_file")
  chown "$NB_UID:$NB_GID" "$jupyter_token_file"
  startup_log INFO "JupyterLab on port $JUPYTER_PORT serving /workspace, token $jupyter_token_origin"
  # JUPYTER_ARGS: extra options, split into separate arguments without a shell (jupyter_args.py).
  if ! jupyter_args_error=$(python3 "$PYTORCH_CUDA_LIB/jupyter_args.py" "$STARTUP_STATE_DIR/jupyter.args" 2>&1); then
    startup_die "$jupyter_args_error"
  fi
  unset jupyter_token jupyter_token_origin jupyter_args_error
fi
