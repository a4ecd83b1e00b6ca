# shellcheck shell=bash
# A service whose port another program holds is not started (ports.py says why): with
# --network host the host's sshd or a second container holds 22, 8888 or 9101, and a service
# started there would only crash and restart with its error in its own log. docker logs and
# the banner say which -e setting moves it; the training command and the monitor run anyway.
# Reads: SSHD_ENABLE, SSH_PORT, JUPYTER_ENABLE, JUPYTER_PORT, METRICS_PORT, METRICS_ADDR.
# Exports: SSHD_ENABLE=0, JUPYTER_ENABLE=0 or METRICS_PORT=0 for a service left off.
ports_wanted=()
if [ "${SSHD_ENABLE:-0}" = 1 ]; then ports_wanted+=("sshd=0.0.0.0:$SSH_PORT"); fi
if [ "$JUPYTER_ENABLE" = 1 ]; then ports_wanted+=("jupyter=0.0.0.0:$JUPYTER_PORT"); fi
if [ "$METRICS_PORT" != 0 ]; then ports_wanted+=("metrics=$METRICS_ADDR:$METRICS_PORT"); fi
while IFS=$'\t' read -r ports_name ports_reason; do
  case $ports_name in
    sshd) export SSHD_ENABLE=0 ;;
    jupyter) export JUPYTER_ENABLE=0 ;;
    metrics) export METRICS_PORT=0 ports_name="diskinfo's metrics endpoint" ;;
    *) continue ;;
  esac
  startup_log WARNING "$ports_name not started: $ports_reason"
  # the service's own log says it too, where its failures would have been
  case $ports_name in sshd | jupyter)
    printf '%s not started: %s\n' "$ports_name" "$ports_reason" | append_log "$ports_name" ;;
  esac
done < <(python3 -I "$PYTORCH_CUDA_LIB/start/ports.py" "$STARTUP_STATE_DIR/ports-taken" "${ports_wanted[@]}")
unset ports_wanted ports_name ports_reason
