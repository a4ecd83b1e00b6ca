# shellcheck shell=bash
# SSH sessions start with sshd's bare environment, so `ssh` users lose the PATH,
# LD_LIBRARY_PATH, CUDA and Python settings and the `docker run -e` variables that the training
# command sees. Write them (secrets left out) to a file readable only by root and NB_USER's
# group, and have bash load it in SSH sessions, which then start in /workspace.
SSH_ENV_FILE=${SSH_ENV_FILE:-/etc/pytorch-cuda/ssh-env.sh}
# Extra names or glob patterns to leave out, e.g. SSH_ENV_EXCLUDE="DB_URL MY_*"
SSH_ENV_EXCLUDE=${SSH_ENV_EXCLUDE:-}

# ssh_env_is_kept NAME: false for secrets and for what each session sets for itself.
ssh_env_is_kept() {
  local pattern
  # shellcheck disable=SC2086  # word splitting of the exclusion list is intended
  for pattern in $SSH_ENV_EXCLUDE; do
    # shellcheck disable=SC2053  # glob match is intended
    [[ $1 == $pattern ]] && return 1
  done
  ! is_secret_name "$1" || return 1
  case $1 in
    HOME | USER | LOGNAME | SHELL | PWD | OLDPWD | SHLVL | _ | TERM | MAIL | HOSTNAME) return 1 ;;
    SSH_CLIENT | SSH_CONNECTION | SSH_TTY | SSH_ORIGINAL_COMMAND) return 1 ;;
    SUPERVISOR_* | SSH_ENV_* | STARTUP_* | BASH_FUNC_*) return 1 ;;
  esac
  return 0
}

# write_ssh_env FILE: the kept variables as POSIX-quoted export lines.
write_ssh_env() {
  local name value q="'" tmp
  tmp=$(mktemp "${1%/*}/.ssh-env.XXXXXX")
  chmod 0600 "$tmp"
  {
    echo "# Written at container start by 60-ssh-env.sh: the container's environment, no secrets."
    while IFS= read -r name; do
      ssh_env_is_kept "$name" || continue
      value=${!name-}
      printf 'export %s=%s\n' "$name" "'${value//$q/$q\\$q$q}'"
    done < <(compgen -e | sort)
    echo "export PYTORCH_CUDA_SSH_ENV=1"
    # NB_USER's own Python environment first on PATH, as for the training command
    printf '. %q/run/user-env.sh && use_user_venv\n' "$PYTORCH_CUDA_LIB"
  } >"$tmp"
  mv -f "$tmp" "$1"
}

mkdir -p "${SSH_ENV_FILE%/*}"
write_ssh_env "$SSH_ENV_FILE"
ssh_env_group=root
if [ -n "${NB_USER:-}" ] && id "$NB_USER" >/dev/null 2>&1; then
  ssh_env_group=$(id -g "$NB_USER")
fi
chown "root:$ssh_env_group" "$SSH_ENV_FILE"
chmod 0640 "$SSH_ENV_FILE"

# Bash reads /etc/bash.bashrc for interactive shells and, on Debian and Ubuntu, also for the
# commands sshd runs (`ssh host cmd`, sftp, VS Code): load the environment there, once per
# session, before the file's "not interactive" early return.
ssh_env_marker="# pytorch-cuda: container environment for SSH sessions"
if ! grep -qF "$ssh_env_marker" /etc/bash.bashrc 2>/dev/null; then
  {
    echo "$ssh_env_marker"
    echo "if [ -n \"\${SSH_CONNECTION-}\" ] && [ -z \"\${PYTORCH_CUDA_SSH_ENV-}\" ] \\"
    echo "  && [ -r $SSH_ENV_FILE ]; then"
    echo "  . $SSH_ENV_FILE"
    echo "  cd /workspace 2>/dev/null || true"
    echo "fi"
    cat /etc/bash.bashrc 2>/dev/null
  } >/etc/bash.bashrc.new
  mv -f /etc/bash.bashrc.new /etc/bash.bashrc
  chmod 0644 /etc/bash.bashrc
fi
startup_log INFO "SSH sessions get the container's environment from $SSH_ENV_FILE" \
  "(secrets left out) and start in /workspace"
unset ssh_env_group ssh_env_marker
