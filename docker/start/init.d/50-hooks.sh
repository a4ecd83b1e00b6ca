# shellcheck shell=bash
# User hooks: executables in /etc/pytorch-cuda/startup.d/ (baked into a derived image or
# mounted) and then /workspace/.startup.d/ (kept with the project) run in lexical order, before
# any service starts. Each is logged with its output and exit status; a failing or hanging hook
# is reported as ERROR and the container starts anyway, so a broken hook never locks users out.
# STARTUP_HOOK_TIMEOUT (seconds, default 300) bounds each hook and everything it started: at
# the deadline its whole process group is killed (run_hook.py), even when the hook itself has
# ended and only a background process (`sleep 600 &`) still holds its output.
# Only hooks NB_USER cannot change run as root: those under /workspace, and any other that is
# not root's (or on a read-only mount) or sits in a directory others can write, run as NB_USER;
# otherwise writing a file there would become root at the next start. Hooks get the
# container's environment without the Jupyter token and PUBLIC_KEY.
# Reads: NB_USER, NB_UID, NB_GID, NB_HOME, STARTUP_HOOK_TIMEOUT (checked by 01-settings.sh).
STARTUP_HOOK_DIRS=${STARTUP_HOOK_DIRS:-/etc/pytorch-cuda/startup.d /workspace/.startup.d}
STARTUP_HOOK_TIMEOUT=${STARTUP_HOOK_TIMEOUT:-300}

# hook_runs_as_root PATH: the hook and its directory are root's alone (or read-only mounts).
hook_runs_as_root() {
  local path
  case $1 in /workspace/*) return 1 ;; esac
  for path in "$1" "${1%/*}"; do
    [ ! -L "$path" ] || return 1
    if [ "$(stat -c %u "$path")" != 0 ] || [ -n "$(find "$path" -maxdepth 0 -perm /022)" ]; then
      # a read-only mount cannot be changed from inside either
      [ "$(findmnt -n -o OPTIONS -T "$path" 2>/dev/null | tr , '\n' | grep -cx ro)" = 1 ] || return 1
    fi
  done
  return 0
}

# run_startup_hook PATH: run one hook, its output prefixed with its name; report its status.
run_startup_hook() {
  local hook=$1 result_file="$STARTUP_STATE_DIR/hook.result" line result start who=root
  local -a runner=(env -u JUPYTER_TOKEN -u JUPYTER_TOKEN_FILE -u PUBLIC_KEY)
  if ! hook_runs_as_root "$hook"; then
    who=$NB_USER
    runner+=("${AS_NB_USER[@]}" env "HOME=$NB_HOME" "USER=$NB_USER" "LOGNAME=$NB_USER")
  fi
  start=$(date +%s)
  startup_log INFO "startup hook $hook: running as $who"
  python3 -I "$PYTORCH_CUDA_LIB/start/run_hook.py" "$STARTUP_HOOK_TIMEOUT" "$result_file" \
    "${runner[@]}" "$hook" | while IFS= read -r line || [ -n "$line" ]; do
    startup_log INFO "  ${hook##*/}: $line"
  done
  result=$(cat "$result_file" 2>/dev/null || echo "exit 1")
  rm -f "$result_file"
  case $result in
    "exit 0") startup_log INFO "startup hook $hook: ok ($(($(date +%s) - start)) s)" ;;
    "exit "*)
      startup_log ERROR "startup hook $hook: FAILED with exit status ${result#exit }; starting anyway" ;;
    "timeout "*)
      startup_log ERROR "startup hook $hook: stopped after ${STARTUP_HOOK_TIMEOUT} s" \
        "(STARTUP_HOOK_TIMEOUT): it exited (${result#timeout }) but left processes holding" \
        "its output (a background job?); they were killed with its process group; starting anyway" ;;
    *)
      startup_log ERROR "startup hook $hook: stopped after ${STARTUP_HOOK_TIMEOUT} s" \
        "(STARTUP_HOOK_TIMEOUT), with its whole process group; starting anyway" ;;
  esac
  case $result in "exit 0") ;; *) printf '%s %s\n' "$result" "${hook//[[:cntrl:]]/?}" >>"$STARTUP_STATE_DIR/failed-hooks" ;; esac
  return 0
}

rm -f "$STARTUP_STATE_DIR/failed-hooks"
for hook_dir in $STARTUP_HOOK_DIRS; do
  [ -d "$hook_dir" ] || continue
  for hook in "$hook_dir"/*; do
    [ -f "$hook" ] || continue
    if [ -x "$hook" ]; then
      run_startup_hook "$hook"
    else
      startup_log WARNING "startup hook $hook: skipped, not executable (chmod +x it)"
    fi
  done
done
unset hook_dir hook
