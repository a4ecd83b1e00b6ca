# shellcheck shell=bash
# NB_USER / NB_UID / NB_GID: every service but sshd runs as this unprivileged user. Renumber the
# image's user at start so files written to bind mounts belong to the host user who passed
# -e NB_UID=$(id -u) -e NB_GID=$(id -g).
NB_USER=${NB_USER:-jovyan}
NB_UID=${NB_UID:-1000}
NB_GID=${NB_GID:-100}
case $NB_UID$NB_GID in *[!0-9]*) startup_die "NB_UID and NB_GID must be numbers, got NB_UID=$NB_UID NB_GID=$NB_GID" ;; esac
[ "$NB_UID" != 0 ] || startup_die "NB_UID=0 would run every service as root; pick a non-zero uid"
[[ $NB_USER =~ ^[a-z_][a-z0-9_-]*$ ]] || startup_die "NB_USER must be a plain user name, got '$NB_USER'"

image_user=$(getent passwd 1000 | cut -d: -f1 || true)
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
home=$(getent passwd "$NB_USER" | cut -d: -f6)
# Only what the image made: never walk a bind-mounted tree.
chown "$NB_UID:$NB_GID" "$home" /workspace 2>/dev/null || true
find "$home" -xdev \( ! -uid "$NB_UID" -o ! -gid "$NB_GID" \) -exec chown -h "$NB_UID:$NB_GID" {} + 2>/dev/null || true
export NB_USER NB_UID NB_GID NB_HOME=$home
startup_log INFO "services run as $NB_USER (uid $NB_UID, gid $NB_GID), home $home"
unset image_user home
