# shellcheck shell=bash
# JupyterLab is always behind a token: JUPYTER_TOKEN, or the file JUPYTER_TOKEN_FILE names, or a
# random one printed once to jupyter.log. The token reaches Jupyter only through a root-owned
# file that NB_USER can read but not change (an emptied file would open the server); hooks
# never see it and 95-secrets.sh removes it from every service's environment. Jupyter reads its configuration only from root-owned directories
# (start-jupyter.sh): $STARTUP_STATE_DIR/jupyter-config stands in for ~/.jupyter, so nothing
# NB_USER writes can switch the token or XSRF checks off. JUPYTER_ENABLE=0 turns Jupyter off.
# Reads: NB_GID, LOG_DIR; JUPYTER_ARGS (checked by 01-settings.sh). Exports: JUPYTER_ENABLE.
if [ -n "${JUPYTER_AS_COMMAND:-}" ]; then  # entrypoint.sh: `docker run IMAGE jupyter lab`
  [ "$JUPYTER_ENABLE" != 0 ] || startup_die "the command '$JUPYTER_AS_COMMAND' asks for" \
    "JupyterLab, which JUPYTER_ENABLE=0 turns off: leave one of the two out"
  startup_log INFO "the command '$JUPYTER_AS_COMMAND' asks for JupyterLab: this image serves it" \
    "already (its URL is below), so the container runs it and no training command; options" \
    "given there are not used (extra ones go in -e JUPYTER_ARGS=...)"
fi
unset JUPYTER_AS_COMMAND
if [ "$JUPYTER_ENABLE" = 0 ]; then
  export JUPYTER_ENABLE=0
  startup_log INFO "JupyterLab disabled (JUPYTER_ENABLE=0)"
else
  export JUPYTER_ENABLE=1
  jupyter_token_file=$STARTUP_STATE_DIR/jupyter-token
  if [ -n "${JUPYTER_TOKEN_FILE:-}" ]; then
    # a small regular file, no link NB_USER could have planted on the way, never a FIFO
    if ! jupyter_token=$(timeout 10 python3 -I "$PYTORCH_CUDA_LIB/shared/safe_paths.py" read \
      --max-bytes 4096 "$JUPYTER_TOKEN_FILE" 2>&1); then
      startup_die "JUPYTER_TOKEN_FILE=$JUPYTER_TOKEN_FILE cannot be used: ${jupyter_token:-timed out}"
    fi
    jupyter_token=${jupyter_token//[$'\r\n']/}
    [ -n "$jupyter_token" ] || startup_die "JUPYTER_TOKEN_FILE=$JUPYTER_TOKEN_FILE is empty; Jupyter never runs without a token"
    jupyter_token_origin="from JUPYTER_TOKEN_FILE"
  elif [ -n "${JUPYTER_TOKEN+set}" ]; then
    jupyter_token=$JUPYTER_TOKEN # not empty: 01-settings.sh refused that
    jupyter_token_origin="from JUPYTER_TOKEN"
  else
    jupyter_token=$(python3 -I -c 'import secrets; print(secrets.token_hex(24))')
    jupyter_token_origin=random
    printf 'Jupyter token (random, shown once; set JUPYTER_TOKEN to choose one): %s\n' \
      "$jupyter_token" | append_log jupyter
  fi
  (umask 077 && printf '%s' "$jupyter_token" >"$jupyter_token_file")
  chown "0:$NB_GID" "$jupyter_token_file"
  chmod 0440 "$jupyter_token_file"
  install -d -o 0 -g 0 -m 0755 "$STARTUP_STATE_DIR/jupyter-config"
  # jupyter_core's IPython migration would write here: the marker says it is done
  install -o 0 -g 0 -m 0644 /dev/null "$STARTUP_STATE_DIR/jupyter-config/migrated"
  for jupyter_env in JUPYTER_CONFIG_DIR JUPYTER_CONFIG_PATH JUPYTER_NO_CONFIG; do
    if [ -n "${!jupyter_env:-}" ]; then
      startup_log WARNING "$jupyter_env is ignored: Jupyter reads its configuration only from" \
        "root-owned directories (use JUPYTER_ARGS, or /etc/jupyter in a derived image)"
    fi
  done
  startup_log INFO "JupyterLab on port $JUPYTER_PORT serving /workspace, token $jupyter_token_origin"
  # JUPYTER_ARGS: extra options, split into separate arguments without a shell (jupyter_args.py).
  if ! jupyter_args_error=$(python3 -I "$PYTORCH_CUDA_LIB/start/jupyter_args.py" "$STARTUP_STATE_DIR/jupyter.args" 2>&1); then
    startup_die "$jupyter_args_error"
  fi
  unset jupyter_token jupyter_token_origin jupyter_args_error jupyter_token_file jupyter_env
fi
