# shellcheck shell=bash
# Secrets reach only the programs that need them. Every variable whose name looks like a
# secret (is_secret_name: *TOKEN*, *SECRET*, *PASSWORD*, *_KEY, ...) leaves the environment
# that supervisord passes to every service, so the monitor, the log tee, sshd and SSH sessions
# never hold them. The training command and JupyterLab (whose kernels do the same work) get
# them back, exactly as passed with -e, from $STARTUP_STATE_DIR/user-secrets: root's, readable
# by NB_USER's group only, NUL-separated NAME=VALUE records (run-train.sh, start-jupyter.sh).
# The Jupyter token and PUBLIC_KEY are never among them: Jupyter reads its token from its own
# file, and sshd has the keys.
# Runs last before supervisord, after the banner (which says where the token came from).
secrets_file=$STARTUP_STATE_DIR/user-secrets
(umask 077 && : >"$secrets_file")
for secret_name in $(compgen -e); do
  is_secret_name "$secret_name" || continue
  case $secret_name in
    JUPYTER_TOKEN | JUPYTER_TOKEN_FILE | PUBLIC_KEY) ;;
    *) printf '%s=%s\0' "$secret_name" "${!secret_name}" >>"$secrets_file" ;;
  esac
  unset "$secret_name"
done
chown "0:$NB_GID" "$secrets_file"
chmod 0440 "$secrets_file"
unset secrets_file secret_name
