# shellcheck shell=bash
# SSH by key only. Keys come from PUBLIC_KEY (one or more lines, options such as from="..."
# kept; checked by 01-settings.sh) and/or a mounted /etc/pytorch-cuda/authorized_keys or
# ~NB_USER/.ssh/authorized_keys; they are copied into a root-owned file sshd trusts whatever
# the mount's owner. The files are read with a size cap and a timeout, as regular files only
# (a FIFO there must not hang the start), the home's as NB_USER; a line that is not a key is
# reported with its number. Host keys are made at the container's first start, never baked
# into the image. No key at all: sshd stays off and we say how.
# Reads: NB_USER, NB_UID, NB_GID, NB_HOME, LOG_DIR. Exports: SSHD_ENABLE, SSH_HOST_KEY_DIR.
export SSH_HOST_KEY_DIR=${SSH_HOST_KEY_DIR:-/etc/ssh} # the one default: start-sshd.sh reads it
ssh_keys_dir=/etc/ssh/authorized_keys.d
mkdir -p "$ssh_keys_dir" /run/sshd
chmod 0755 "$ssh_keys_dir"

# ssh_keys_from LABEL COMMAND...: the key lines of the text COMMAND prints (a bounded read:
# a regular file, at most 64 KiB, within 10 s); problems logged.
ssh_keys_from() {
  local label=$1 text problem
  shift
  if ! text=$("$@" 2>"$STARTUP_STATE_DIR/ssh-keys.err"); then
    startup_log WARNING "sshd: $label not read: $(head -c 300 "$STARTUP_STATE_DIR/ssh-keys.err")"
    return 0
  fi
  printf '%s\n' "$text" | python3 -I "$PYTORCH_CUDA_LIB/start/ssh_keys.py" "$label" \
    2>"$STARTUP_STATE_DIR/ssh-keys.err"
  while IFS= read -r problem; do
    startup_log WARNING "sshd: $problem"
  done <"$STARTUP_STATE_DIR/ssh-keys.err"
  rm -f "$STARTUP_STATE_DIR/ssh-keys.err"
}

{
  if [ -n "${PUBLIC_KEY:-}" ]; then printf '%s\n' "$PUBLIC_KEY" | python3 -I "$PYTORCH_CUDA_LIB/start/ssh_keys.py"; fi
  if [ -e /etc/pytorch-cuda/authorized_keys ]; then
    ssh_keys_from /etc/pytorch-cuda/authorized_keys timeout 10 \
      python3 -I "$PYTORCH_CUDA_LIB/shared/safe_paths.py" read /etc/pytorch-cuda/authorized_keys
  fi
  if [ -e "$NB_HOME/.ssh/authorized_keys" ] || [ -L "$NB_HOME/.ssh/authorized_keys" ]; then
    ssh_keys_from "$NB_HOME/.ssh/authorized_keys" timeout 10 \
      "${AS_NB_USER[@]}" python3 -I "$PYTORCH_CUDA_LIB/shared/safe_paths.py" read --follow "$NB_HOME/.ssh/authorized_keys"
  fi
} | sort -u >"$ssh_keys_dir/$NB_USER"
chmod 0644 "$ssh_keys_dir/$NB_USER"
unset PUBLIC_KEY

if [ -s "$ssh_keys_dir/$NB_USER" ]; then
  export SSHD_ENABLE=1
  # root writes the private host keys there by name: only in a folder no other account can
  # write or swap (a named volume's root is root's), never in one NB_USER could fill with links
  key_dir_made_in=$SSH_HOST_KEY_DIR
  until [ -e "$key_dir_made_in" ] || [ -L "$key_dir_made_in" ]; do
    key_dir_made_in=${key_dir_made_in%/*}
    key_dir_made_in=${key_dir_made_in:-/}
  done
  root_can_trust "$key_dir_made_in" || startup_die "SSH_HOST_KEY_DIR=$SSH_HOST_KEY_DIR:" \
    "$key_dir_made_in can be written by an account other than root; host keys need a folder" \
    "only root writes (a volume: -v ssh-host-keys:/keys)"
  unset key_dir_made_in
  mkdir -p "$SSH_HOST_KEY_DIR"
  for type in ed25519 ecdsa rsa; do
    key="$SSH_HOST_KEY_DIR/ssh_host_${type}_key"
    [ -s "$key" ] || ssh-keygen -q -t "$type" -N '' -C "" -f "$key"
  done
  startup_log INFO "sshd: $(wc -l <"$ssh_keys_dir/$NB_USER") key(s) for $NB_USER, port $SSH_PORT;" \
    "host key $(ssh-keygen -l -f "$SSH_HOST_KEY_DIR/ssh_host_ed25519_key.pub" | cut -d' ' -f2)"
else
  export SSHD_ENABLE=0
  msg="sshd not started: no public key. Enable SSH with -e PUBLIC_KEY=\"\$(cat ~/.ssh/id_*.pub)\""
  msg+=" or mount your authorized_keys at /etc/pytorch-cuda/authorized_keys"
  startup_log INFO "$msg"
  printf '%s\n' "$msg" | append_log sshd
  unset msg
fi
unset ssh_keys_dir type key
unset -f ssh_keys_from
