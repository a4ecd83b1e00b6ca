# shellcheck shell=bash
# use_user_venv: put NB_USER's Python environment (USER_VENV, made by docker/build/user-venv)
# first on PATH, so that `python`, `pip install`, `torchrun` and the rest use it. Sourced by the
# training command's wrapper, Jupyter's start and SSH sessions; a no-op for root, whose
# processes only ever run the image's root-owned environment.
use_user_venv() {
  [ -n "${USER_VENV:-}" ] && [ -x "$USER_VENV/bin/python" ] && [ "$(id -u)" != 0 ] || return 0
  case ":$PATH:" in
    *":$USER_VENV/bin:"*) ;;
    *) PATH=$USER_VENV/bin:$PATH ;;
  esac
  export PATH VIRTUAL_ENV=$USER_VENV
}
