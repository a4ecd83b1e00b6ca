# shellcheck shell=bash
# DataLoader workers pass batches through /dev/shm and die with "Bus error" when it is Docker's
# default 64 MB. diskinfo measures it and holds it against SHM_MIN_MB (0: never warn), as the
# banner and the monitor's verdict do: warn once here with the fix.
shm_status=0
shm=$(python3 -I -m diskinfo.sources.shm 2>&1) || shm_status=$?
if [ "$shm_status" = 0 ]; then
  shm_mb=${shm% *}
  export SHM_SIZE_MB=$shm_mb
  printf '%s\n' "$shm_mb" >"$STARTUP_STATE_DIR/shm_mb" 2>/dev/null || true
  if [ "${shm#* }" = small ]; then
    startup_log WARNING "/dev/shm is only ${shm_mb} MB: PyTorch DataLoader workers" \
      "(num_workers > 0) can die with \"Bus error\" or \"unable to allocate shared memory\"." \
      "Restart the container with --shm-size=16g or --ipc=host."
  fi
elif [ "$shm_status" = 3 ]; then
  startup_log WARNING "/dev/shm is not mounted: DataLoader workers will fail." \
    "Restart the container with --shm-size=16g or --ipc=host."
else
  startup_log WARNING "/dev/shm check failed: $shm"
fi
unset shm shm_mb shm_status
