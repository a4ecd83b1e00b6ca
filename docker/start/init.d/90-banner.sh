# shellcheck shell=bash
# The start banner, last before the services start: versions, GPUs and driver, /dev/shm,
# services and ports, where the Jupyter token is, where logs go. A failing banner must never
# stop the container, so its errors are logged and ignored.
if banner=$(timeout 60 python3 -I "$PYTORCH_CUDA_LIB/start/banner.py" 2>&1); then
  startup_log_text "$banner"
else
  startup_log WARNING "start banner failed: $banner"
fi
unset banner
