#!/usr/bin/env bash
# The entrypoint where the root start cannot run: without root (`docker run --user 1000:100`,
# `apptainer run`, Charliecloud or rootless podman naming the entrypoint) or as root on a
# read-only image (`docker run --read-only`: the account, sshd's keys and the logs folder's
# owner cannot be prepared). The command runs beside the monitor through `diskinfo run`, the
# way in that pyxis and `apptainer exec` users type themselves; sshd and the services are off,
# said in one line. Nothing here is a root-only step: root only gives itself up, first.
set -euo pipefail
stamp() { date -u '+%Y-%m-%d %H:%M:%S'; }

if [ "$(id -u)" = 0 ]; then
  # Root on a read-only image: become NB_UID:NB_GID (the image's user unless -e says otherwise)
  # and start again from the top, as that user. Nothing of the user's is read as root.
  for id_var in NB_UID NB_GID; do
    if ! [[ ${!id_var:-} =~ ^[0-9]+$ ]] || [ "$((10#${!id_var}))" -gt 2147483647 ]; then
      echo "ERROR ${id_var}=${!id_var:-} must be a whole number (the image sets it)" >&2
      exit 2
    fi
  done
  if [ "$((10#$NB_UID))" = 0 ]; then
    echo "ERROR NB_UID=$NB_UID is root: the command never runs as root; leave NB_UID unset" >&2
    exit 2
  fi
  echo "INFO[$(stamp)] the image's root filesystem is read-only (docker run --read-only):" \
    "nothing can be prepared as root, so the command runs as uid $((10#$NB_UID)) without" \
    "sshd or JupyterLab; drop --read-only to have them" >&2
  home=$(/usr/bin/getent passwd "$((10#$NB_UID))" | cut -d: -f6 || true)
  exec /usr/bin/setpriv "--reuid=$((10#$NB_UID))" "--regid=$((10#$NB_GID))" --clear-groups \
    /usr/bin/env "HOME=${home:-/}" "$0" "$@"
fi

if [ "$#" = 0 ]; then
  echo "ERROR[$(stamp)] nothing to run: without root this image runs your command beside" \
    "the I/O monitor, e.g. \`python train.py\` after the image's name; JupyterLab and sshd" \
    "need the root start (docker run without --user; -e NB_UID=\$(id -u) makes your files" \
    "yours)" >&2
  exit 2
fi
# `jupyter lab` as the command (jupyter/docker-stacks' habit, as in a root start): this user's
# own server, behind a token as always (JUPYTER_TOKEN, JUPYTER_TOKEN_FILE or a random one, in
# a file only this user reads, which /etc/jupyter's configuration requires), serving the
# working folder, beside the monitor like any command.
jupyter=0
case "${1##*/}" in
  jupyter) [[ ${2:-} =~ ^(lab|notebook|server)$ ]] && jupyter=1 ;;
  jupyter-lab | jupyter-notebook | jupyter-server) jupyter=1 ;;
esac
if [ "$jupyter" = 1 ]; then
  token_file=$(mktemp "${TMPDIR:-/tmp}/pytorch-cuda-jupyter-token.XXXXXX") || {
    echo "ERROR[$(stamp)] no private file for Jupyter's token in ${TMPDIR:-/tmp}: set TMPDIR" \
      "to a folder you can write, or mount one (docker --tmpfs /tmp)" >&2
    exit 2
  }
  url="http://127.0.0.1:${JUPYTER_PORT}/lab?token="
  if [ -n "${JUPYTER_TOKEN_FILE:-}" ]; then
    token=$(head -c 4096 "$JUPYTER_TOKEN_FILE" | tr -d '\r\n') && url+=YOUR_TOKEN
  elif [ -n "${JUPYTER_TOKEN:-}" ]; then
    token=$JUPYTER_TOKEN url+=YOUR_TOKEN
  else
    token=$(python3 -I -c 'import secrets; print(secrets.token_hex(24))') && url+=$token
  fi
  if [ -z "$token" ]; then
    echo "ERROR[$(stamp)] the Jupyter token is empty: Jupyter never runs without one" >&2
    exit 2
  fi
  printf '%s' "$token" >"$token_file"
  unset JUPYTER_TOKEN token
  export JUPYTER_TOKEN_FILE=$token_file
  echo "INFO[$(stamp)] running as uid $(id -u) without root: sshd needs root and is not" \
    "started; JupyterLab on port $JUPYTER_PORT serving $PWD: $url" >&2
  exec diskinfo run -- "$@" "--ServerApp.root_dir=$PWD"
fi
echo "INFO[$(stamp)] running as uid $(id -u) without root: sshd needs root and is not" \
  "started, JupyterLab neither (\`jupyter lab\` as the command starts it); your command runs" \
  "beside the I/O monitor (diskinfo run)" >&2
exec diskinfo run -- "$@"
