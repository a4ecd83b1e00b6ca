# shellcheck shell=bash
# Every setting is checked here, once, before anything else happens (settings.py): a bad
# value stops the container with one line naming the variable and what it accepts. The checked
# values are exported in canonical form (NB_UID=0100 -> 100, TRAIN_LOG_MAX_BYTES=50M ->
# 52428800, JUPYTER_ENABLE=true -> 1), and DISKINFO_PATHS' entries go, NUL-separated, to
# $STARTUP_STATE_DIR/diskinfo-paths for the monitor.
# Exports: the settings that are set. Defines is_secret_name for 60-ssh-env.sh, 95-secrets.sh.
settings_out=$STARTUP_STATE_DIR/settings.env
if ! settings_error=$(python3 -I "$PYTORCH_CUDA_LIB/start/settings.py" \
  --paths-file "$STARTUP_STATE_DIR/diskinfo-paths" 2>&1 >"$settings_out"); then
  startup_die "${settings_error:-settings check failed}"
fi
while IFS= read -r -d '' setting; do
  export "${setting?}"
done <"$settings_out"
rm -f "$settings_out"
unset settings_out settings_error setting

# is_secret_name NAME: true for a variable that must not reach programs that do not need it
# (the monitor, the log tee, sshd, SSH sessions): tokens, passwords, keys, credentials.
is_secret_name() {
  case $1 in
    PUBLIC_KEY | *TOKEN* | *PASSWORD* | *PASSWD* | *SECRET* | *CREDENTIAL* | *PRIVATE* \
      | *_KEY | *_KEY_ID | *API_KEY* | *ACCESS_KEY* | *AUTH*) return 0 ;;
  esac
  return 1
}
