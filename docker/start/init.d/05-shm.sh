# shellcheck shell=bash
# DataLoader workers pass batches through /dev/shm and die with "Bus error" when it is Docker's
# default 64 MB. Measure it once, warn once with the fix, and record the size for the monitor.
SHM_MIN_MB=${SHM_MIN_MB:-1024}
shm_mb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { printf "%d", $2 / 1024 }') || shm_mb=
if [ -n "$shm_mb" ]; then
  export SHM_SIZE_MB=$shm_mb
  printf '%s\n' "$shm_mb" >"$STARTUP_STATE_DIR/shm_mb" 2>/dev/null || true
  if [ "$shm_mb" -lt "$SHM_MIN_MB" ]; then
    startup_log WARNING "/dev/shm is only ${shm_mb} MB: PyTorch DataLoader workers" \
      "(num_workers > 0) can die with \"Bus error\" or \"unable to allocate shared memory\"." \
      "Restart the container with --shm-size=16g or --ipc=host."
  fi
else
  startup_log WARNING "/dev/shm is not mounted: DataLoader workers will fail." \
    "Restart the container with --shm-size=16g or --ipc=host."
fi
unset shm_mb
