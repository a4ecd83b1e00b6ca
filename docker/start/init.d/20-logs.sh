# shellcheck shell=bash
# Every log under LOG_DIR (/workspace/logs), owned by NB_USER so a bind-mounted logs directory
# stays the host user's. Root only prepares the directory, by descriptor (safe_paths.py): a
# symbolic link or a file in its place is replaced with a real directory, links and FIFOs
# named like the project's logs are removed, and the project's log files left by a run with
# another uid are handed to NB_UID; each with one line saying so. Every log file is then
# written by NB_USER (log-tee.py), never opened by root. DISKINFO_STATE_DIR is where the
# DataLoader wrapper and the monitor meet.
# Reads: NB_UID, NB_GID, LOG_DIR, DISKINFO_STATE_DIR. Opens STARTUP_LOG_FD.
for log_target in "logs LOG_DIR" "dir DISKINFO_STATE_DIR"; do
  log_var=${log_target#* }
  if ! log_notes=$(python3 -I "$PYTORCH_CUDA_LIB/shared/safe_paths.py" "${log_target%% *}" \
    "${!log_var}" "$NB_UID" "$NB_GID" 2>&1); then
    startup_die "$log_var=${!log_var} cannot be used: $log_notes"
  fi
  while IFS= read -r log_note; do
    [ -z "$log_note" ] || startup_log WARNING "$log_note"
  done <<<"$log_notes"
done
# The training wrapper (as NB_USER) writes its pid and exit status here.
install -d -o "$NB_UID" -g "$NB_GID" -m 0755 "$STARTUP_STATE_DIR/train"
install -o "$NB_UID" -g "$NB_GID" -m 0644 /dev/null "$STARTUP_STATE_DIR/train.pid"
startup_log_open
unset log_target log_var log_notes log_note
