# shellcheck shell=bash
# User hooks: executables in /etc/pytorch-cuda/startup.d/ (baked into a derived image or
# mounted) and then /workspace/.startup.d/ (kept with the project) run as root, in lexical
# order, before any service starts. Each is logged with its output and exit status; a failing
# hook is reported and the container starts anyway, so a broken hook never locks users out.
STARTUP_HOOK_DIRS=${STARTUP_HOOK_DIRS:-/etc/pytorch-cuda/startup.d /workspace/.startup.d}

# run_startup_hook PATH: run one hook, its output prefixed with its name; returns its status.
run_startup_hook() {
  local hook=$1 rc_file="$STARTUP_STATE_DIR/hook.rc" line rc start
  start=$(date +%s)
  startup_log INFO "startup hook $hook: running"
  {
    rc=0
    "$hook" </dev/null 2>&1 || rc=$?
    printf '%s\n' "$rc" >"$rc_file"
  } | while IFS= read -r line || [ -n "$line" ]; do
    startup_log INFO "  ${hook##*/}: $line"
  done
  rc=$(cat "$rc_file" 2>/dev/null || echo 1)
  rm -f "$rc_file"
  if [ "$rc" -eq 0 ]; then
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
