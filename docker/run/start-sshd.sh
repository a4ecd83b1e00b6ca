#!/usr/bin/env bash
# sshd in the foreground, logging to stderr (-> sshd.log), on SSH_PORT, only NB_USER allowed,
# with the host keys 30-ssh.sh made for this container. Their folder comes from 30-ssh.sh too
# (it exports SSH_HOST_KEY_DIR with its default): one default, in one script.
set -euo pipefail
dir=${SSH_HOST_KEY_DIR:?is exported by 30-ssh.sh at every start}
hostkeys=()
for key in "$dir"/ssh_host_*_key; do hostkeys+=(-h "$key"); done
exec /usr/sbin/sshd -D -e -f /etc/pytorch-cuda/sshd_config -p "$SSH_PORT" \
  "${hostkeys[@]}" -o "AllowUsers=$NB_USER"
