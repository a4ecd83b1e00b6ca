# shellcheck shell=bash
# The start banner, last before the services start: versions, GPUs and driver, /dev/shm,
# services and ports, where the Jupyter token is, where logs go. A failing banner must never
# stop the container, so its errors are logged and ignored.
PYTORCH_CUDA_LIB=${PYTORCH_CUDA_LIB:-/usr/local/lib/pytorch-cuda}
if banner=$(python3 "$PYTORCH_CUDA_LIB/banner.py" 2>&1); then
  printf '%s\n' "$banner" >&2
  printf '%s\n' "$banner" >>"$STARTUP_LOG" 2>/dev/null || true
else
  startup_log WARNING "start banner failed: $banner"
fi
unset banner
