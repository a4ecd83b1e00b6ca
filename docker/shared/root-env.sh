# shellcheck shell=bash
# What every root process of the image starts from: a root-owned working directory and a PATH
# made only of directories NB_USER cannot write. Sourced by entrypoint.sh (and so by every
# start-up step, supervisord and what it runs as root) and by healthcheck.sh, which Docker
# starts in the image's WORKDIR, /workspace.
#
# Root never trusts a path the user controls. A Python started with -c or -m puts its working
# directory first on sys.path, and a command found through PATH is whatever the first matching
# directory holds: /workspace/secrets.py or /workspace/bin/python3 would run as root. So root
# works from /, runs every Python as `python3 -I` (no working or script directory on sys.path,
# no PYTHON* variables, no user site), and looks commands up only in root's own directories.

# root_can_trust DIR: DIR and every directory above it, both as named and as resolved, belong
# to root and only root can write them: nobody else can put a program there or swap the folder.
root_can_trust() {
  local path real owner uid mode
  [[ $1 == /* ]] && real=$(realpath -e -- "$1" 2>/dev/null) && [ -d "$real" ] || return 1
  for path in "$1" "$real"; do
    while :; do
      # a command substitution, waited for: a process substitution's stat would outlive the
      # health check and be reaped by supervisord as an "unknown pid" every 5 s
      owner=$(stat -c '%u %a' -- "$path" 2>/dev/null) || return 1
      read -r uid mode <<<"$owner"
      [ "$uid" = 0 ] || return 1
      # a link's own mode means nothing; where it leads is checked as the resolved path
      [ -L "$path" ] || ((!(8#$mode & 8#022))) || return 1
      [ "$path" != / ] || break
      path=$(dirname -- "$path")
    done
  done
}

# root_path PATH: PATH's entries that root can trust, in order (the left-out ones on stderr).
root_path() {
  local entry kept=
  local -a entries
  IFS=: read -r -a entries <<<"$1"
  for entry in "${entries[@]}"; do
    if root_can_trust "$entry"; then
      case ":$kept:" in *":$entry:"*) ;; *) kept=${kept:+$kept:}$entry ;; esac
    elif [ -e "$entry" ]; then
      echo "$entry" >&2
    fi
  done
  printf '%s\n' "$kept"
}
