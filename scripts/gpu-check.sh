#!/usr/bin/env bash
# Validate the CUDA stack and the monitor's GPU path on a GPU host's own Python (no Docker, no
# network: the NVIDIA driver, Python, nvidia-ml-py and torch if importable) and keep the evidence:
#   OUTDIR/<UTC time>-<GPU>.json and .txt            validate-cuda's report and table
#   OUTDIR/<UTC time>-<GPU>-patterns.json and .txt   the GPU collector and verdict on a CUDA
#                                                    load: steady, pulsing, idle, one of several
#   scripts/gpu-check.sh [OUTDIR]        OUTDIR defaults to docs/validation
# The host's torch may be built for another CUDA than the image's, so the expected CUDA is
# EXPECT_CUDA if set, else the host torch's own build (say so when committing the report).
# Extra options for validate-cuda go in VALIDATE_CUDA_ARGS; VALIDATE_CUDA=0 skips it (the NVML
# stand-in's smoke test). GPU_CHECK_PATTERNS picks patterns (comma-separated), GPU_CHECK_SECONDS
# their length. Exit status: validate-cuda's, else the patterns' (1: a verdict not as expected).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/docs/validation}
py=${PYTHON:-python3}
mkdir -p "$out"
probe='import torch; print(torch.version.cuda or "", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no-gpu", sep="|")'
# from /: `python3 -c` puts its working directory first on sys.path, and the caller's (root's,
# on a GPU host) could hold a torch.py; -I would also drop a user-site torch
info=$(cd / && "$py" -c "$probe" 2>/dev/null || echo "|no-torch")
expect=${EXPECT_CUDA:-${info%%|*}}
gpu=$(printf '%s' "${info#*|}" | tr -c 'A-Za-z0-9.\n-' '-')
name="$out/$(date -u +%Y%m%dT%H%M%SZ)-$gpu"
rc=0
if [ "${VALIDATE_CUDA:-1}" != 0 ]; then
  args=(--report "$name.json")
  if [ -n "$expect" ]; then args+=(--expect-cuda "$expect"); fi
  # shellcheck disable=SC2206  # word splitting of the extra options is intended
  args+=(${VALIDATE_CUDA_ARGS:-})
  set +e
  "$py" "$repo/scripts/validate-cuda" "${args[@]}" 2>&1 | tee "$name.txt"
  rc=${PIPESTATUS[0]}
  set -e
  echo "gpu-check: validate-cuda exit status $rc; table in $name.txt"
fi
set +e
PYTHONPATH="$repo/src${PYTHONPATH:+:$PYTHONPATH}" "$py" "$repo/scripts/gpu_patterns.py" \
  --report "$name-patterns.json" --patterns "${GPU_CHECK_PATTERNS:-steady,pulsing,idle,several}" \
  --seconds "${GPU_CHECK_SECONDS:-12}" 2>&1 | tee "$name-patterns.txt"
prc=${PIPESTATUS[0]}
set -e
echo "gpu-check: GPU patterns exit status $prc; table in $name-patterns.txt"
if [ "$rc" = 0 ]; then rc=$prc; fi
exit "$rc"
