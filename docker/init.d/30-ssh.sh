# shellcheck shell=bash
# SSH by key only. Keys come from PUBLIC_KEY (one or more lines) and/or a mounted
# /etc/pytorch-cuda/authorized_keys or ~NB_USER/.ssh/authorized_keys; they are copied into a
# root-owned file sshd trusts whatever the mount's owner. Host keys are made at the container's
# first start, never baked into the image. No key at all: sshd stays off and we say how.
SSH_PORT=${SSH_PORT:-22}
SSH_HOST_KEY_DIR=${SSH_HOST_KEY_DIR:-/etc/ssh}
ssh_keys_dir=/etc/ssh/authorized_keys.d
mkdir -p "$ssh_keys_dir" /run/sshd
chmod 0755 "$ssh_keys_dir"
{
  if [ -n "${PUBLIC_KEY:-}" ]; then printf '%s\n' "$PUBLIC_KEY"; fi
  for f in /etc/pytorch-cuda/authorized_keys "$NB_HOME/.ssh/authorized_keys"; do
    if [ -r "$f" ]; then cat "$f"; echo; fi
  done
} | grep -E '^(ssh-|ecdsa-|sk-)' | sort -u >"$ssh_keys_dir/$NB_USER" || true
chmod 0644 "$ssh_keys_dir/$NB_USER"
unset PUBLIC_KEY

if [ -s "$ssh_keys_dir/$NB_USER" ]; then
  export SSHD_ENABLE=1
  mkdir -p "$SSH_HOST_KEY_DIR"
  for type in ed25519 ecdsa rsa; do
    key="$SSH_HOST_KEY_DIR/ssh_host_${type}_key"
    [ -s "$key" ] || ssh-keygen -q -t "$type" -N '' -C "" -f "$key"
  done
  export SSH_HOST_KEY_DIR
  startup_log INFO "sshd: $(wc -l <"$ssh_keys_dir/$NB_USER") key(s) for $NB_USER, port $SSH_PORT;" \
    "host key $(ssh-keygen -l -f "$SSH_HOST_KEY_DIR/ssh_host_ed25519_key.pub" | cut -d' ' -f2)"
else
  export SSHD_ENABLE=0
  msg="sshd not started: no public key. Enable SSH with -e PUBLIC_KEY=\"\$(cat ~/.ssh/id_ed25519.pub)\" or mount your authorized_keys at /etc/pytorch-cuda/authorized_keys"
  startup_log INFO "$msg"
  printf '%s\n' "$msg" >>"$LOG_DIR/sshd.log"
  unset msg
fi
unset ssh_keys_dir f type key
