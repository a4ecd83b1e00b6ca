# shellcheck shell=bash
# Every log under /workspace/logs, owned by NB_USER so a bind-mounted logs directory stays the
# host user's. supervisord opens its log files as root: create them first, so they keep NB_USER
# as owner. DISKINFO_STATE_DIR is where the DataLoader wrapper and the monitor meet.
LOG_DIR=${LOG_DIR:-/workspace/logs}
DISKINFO_STATE_DIR=${DISKINFO_STATE_DIR:-/run/diskinfo}
mkdir -p "$LOG_DIR" "$DISKINFO_STATE_DIR"
if ! touch "$LOG_DIR/.write-test" 2>/dev/null; then
  startup_die "$LOG_DIR is not writable; mount a writable directory there"
fi
rm -f "$LOG_DIR/.write-test"
chown "$NB_UID:$NB_GID" "$LOG_DIR" "$DISKINFO_STATE_DIR" 2>/dev/null || true
for log in supervisord sshd jupyter diskinfo-monitor train startup; do
  touch "$LOG_DIR/$log.log"
  chown "$NB_UID:$NB_GID" "$LOG_DIR/$log.log" 2>/dev/null || true
done
# The training wrapper (as NB_USER) writes its pid and exit status here.
install -d -o "$NB_UID" -g "$NB_GID" -m 0755 "$STARTUP_STATE_DIR/train"
install -o "$NB_UID" -g "$NB_GID" -m 0644 /dev/null "$STARTUP_STATE_DIR/train.pid"
export LOG_DIR DISKINFO_STATE_DIR
unset log
