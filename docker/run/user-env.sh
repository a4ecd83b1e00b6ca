# shellcheck shell=bash
# use_user_venv: give NB_USER back the PATH the container was given (NB_USER_PATH: root's
# PATH leaves out the directories NB_USER can write, entrypoint.sh) and put NB_USER's Python
# environment (USER_VENV, made by docker/build/user-venv) first on it, so that `python`,
# `pip install`, `torchrun` and the rest use it. Sourced by the training command's wrapper,
# Jupyter's start and SSH sessions; a no-op for root, whose processes only ever run the image's
# root-owned environment.
use_user_venv() {
  [ "$(id -u)" != 0 ] || return 0
  [ -z "${NB_USER_PATH:-}" ] || PATH=$NB_USER_PATH
  export PATH
  [ -n "${USER_VENV:-}" ] && [ -x "$USER_VENV/bin/python" ] || return 0
  case ":$PATH:" in
    *":$USER_VENV/bin:"*) ;;
    *) PATH=$USER_VENV/bin:$PATH ;;
  esac
  export PATH VIRTUAL_ENV=$USER_VENV
}
