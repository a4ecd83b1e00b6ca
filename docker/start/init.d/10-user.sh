# shellcheck shell=bash
# NB_USER / NB_UID / NB_GID: every service but sshd runs as this unprivileged user. Renumber the
# image's user at start so files written to bind mounts belong to the host user who passed
# -e NB_UID=$(id -u) -e NB_GID=$(id -g). The values were checked by 01-settings.sh (numbers,
# not root, not another system account's name). The image's own account is the one named in
# /var/lib/pytorch-cuda/nb-user (written here), at first the image's uid 1000.
# Exports: NB_USER, NB_UID, NB_GID, NB_HOME. Sets AS_NB_USER, the one way steps drop to it.
nb_user_record=/var/lib/pytorch-cuda/nb-user

image_user=$(cat "$nb_user_record" 2>/dev/null || true)
if [ -z "$image_user" ] || ! id "$image_user" >/dev/null 2>&1; then
  image_user=$(getent passwd 1000 | cut -d: -f1 || true)
fi
if ! id "$NB_USER" >/dev/null 2>&1; then
  if [ -n "$image_user" ] && [ "$image_user" != "$NB_USER" ]; then
    usermod -l "$NB_USER" -d "/home/$NB_USER" -m "$image_user"
    startup_log INFO "renamed user $image_user to $NB_USER"
  else
    useradd -m -s /bin/bash -u "$NB_UID" -g 100 "$NB_USER"
    usermod -p '*' "$NB_USER"
  fi
fi
if [ "$(id -g "$NB_USER")" != "$NB_GID" ]; then
  getent group "$NB_GID" >/dev/null || groupadd -g "$NB_GID" "$NB_USER"
  usermod -g "$NB_GID" "$NB_USER"
fi
if [ "$(id -u "$NB_USER")" != "$NB_UID" ]; then
  # -o: the host's uid may already name another user in the image
  usermod -o -u "$NB_UID" "$NB_USER"
fi
mkdir -p "${nb_user_record%/*}"
printf '%s\n' "$NB_USER" >"$nb_user_record"
home=$(getent passwd "$NB_USER" | cut -d: -f6)
# /workspace is a mount point or the image's directory: its own owner only, never a walk of it.
chown -h "$NB_UID:$NB_GID" /workspace 2>/dev/null || true
# The home and NB_USER's Python environment (USER_VENV, docker/build/user-venv), the image's
# own trees, never bind-mounted ones: by descriptor, links never followed.
for owned in "$home" ${USER_VENV:+"$USER_VENV"}; do
  if home_notes=$(python3 -I "$PYTORCH_CUDA_LIB/shared/safe_paths.py" home "$owned" "$NB_UID" "$NB_GID" 2>&1); then
    [ -z "$home_notes" ] || startup_log WARNING "$home_notes"
  else
    startup_log WARNING "$owned not handed to $NB_USER: $home_notes"
  fi
done
export NB_USER NB_UID NB_GID NB_HOME=$home
# shellcheck disable=SC2034  # used by the later steps and entrypoint.sh, which source this
AS_NB_USER=(setpriv "--reuid=$NB_UID" "--regid=$NB_GID" --init-groups)
startup_log INFO "services run as $NB_USER (uid $NB_UID, gid $NB_GID), home $home"
unset image_user home home_notes nb_user_record owned
