# shellcheck shell=bash
# User hooks: executables in /etc/pytorch-cuda/startup.d/ (baked into a derived image or
# mounted) and then /workspace/.startup.d/ (kept with the project) run in lexical order, before
# any service starts. Each is logged with its output and exit status; a failing or hanging hook
# (STARTUP_HOOK_TIMEOUT seconds, default 300) is reported and the container starts anyway, so a
# broken hook never locks users out. Only the /etc hooks run as root: /workspace is writable by
# NB_USER (and so by anyone with the Jupyter token), so its hooks run as NB_USER; otherwise
# writing a file there would become root at the next start.
STARTUP_HOOK_DIRS=${STARTUP_HOOK_DIRS:-/etc/pytorch-cuda/startup.d /workspace/.startup.d}
STARTUP_HOOK_TIMEOUT=${STARTUP_HOOK_TIMEOUT:-300}
case $STARTUP_HOOK_TIMEOUT in '' | *[!0-9]*)
  startup_die "STARTUP_HOOK_TIMEOUT must be whole seconds, got '$STARTUP_HOOK_TIMEOUT'" ;;
esac

# run_startup_hook PATH: run one hook, its output prefixed with its name; returns its status.
run_startup_hook() {
  local hook=$1 rc_file="$STARTUP_STATE_DIR/hook.rc" line rc start who=root
  local -a runner=(timeout --kill-after=5 "$STARTUP_HOOK_TIMEOUT")
  case $hook in /workspace/*)
    who=$NB_USER
    runner+=(setpriv "--reuid=$NB_UID" "--regid=$NB_GID" --init-groups
      env "HOME=$NB_HOME" "USER=$NB_USER" "LOGNAME=$NB_USER") ;;
  esac
  start=$(date +%s)
  startup_log INFO "startup hook $hook: running as $who"
  {
    rc=0
    "${runner[@]}" "$hook" </dev/null 2>&1 || rc=$?
    printf '%s\n' "$rc" >"$rc_file"
  } | while IFS= read -r line || [ -n "$line" ]; do
    startup_log INFO "  ${hook##*/}: $line"
  done
  rc=$(cat "$rc_file" 2>/dev/null || echo 1)
  rm -f "$rc_file"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    startup_log ERROR "startup hook $hook: stopped after ${STARTUP_HOOK_TIMEOUT} s" \
      "(STARTUP_HOOK_TIMEOUT); starting anyway"
    printf '%s %s\n' "$rc" "$hook" >>"$STARTUP_STATE_DIR/failed-hooks"
  elif [ "$rc" -eq 0 ]; then
    startup_log INFO "startup hook $hook: ok ($(($(date +%s) - start)) s)"
  else
    startup_log ERROR "startup hook $hook: FAILED with exit status $rc; starting anyway"
    printf '%s %s\n' "$rc" "$hook" >>"$STARTUP_STATE_DIR/failed-hooks"
  fi
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
