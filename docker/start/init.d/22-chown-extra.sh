# shellcheck shell=bash
# CHOWN_EXTRA (docker-stacks' name): folders mounted at or under /workspace, comma-separated,
# handed to NB_USER with everything in them before any of NB_USER's programs runs. The way for
# root on the host (cloud GPU VMs, where the project folder is root's) to let Jupyter and the
# training command save there: the files become NB_UID's on the host, which root there still
# reads and writes. By descriptor, links and hard-linked files left alone (safe_paths.py).
# Reads: CHOWN_EXTRA, NB_USER, NB_UID, NB_GID.
if [ -n "${CHOWN_EXTRA:-}" ]; then
  IFS=, read -r -a chown_extra <<<"$CHOWN_EXTRA"
  for chown_path in "${chown_extra[@]}"; do
    [ -n "$chown_path" ] || continue
    if ! chown_notes=$(python3 -I "$PYTORCH_CUDA_LIB/shared/safe_paths.py" give "$chown_path" \
      "$NB_UID" "$NB_GID" 2>&1); then
      startup_die "CHOWN_EXTRA=$CHOWN_EXTRA cannot be used: $chown_notes"
    fi
    [ -z "$chown_notes" ] || startup_log WARNING "$chown_notes"
    startup_log INFO "$chown_path and everything in it now belong to $NB_USER (uid $NB_UID)" \
      "(CHOWN_EXTRA)"
  done
fi
unset chown_extra chown_path chown_notes
