#!/usr/bin/env bash
# Validate the CUDA stack on a GPU host's own Python (no Docker needed) and keep the evidence:
# writes OUTDIR/<UTC time>-<GPU>.json (the report) and .txt (the table).
#   scripts/gpu-check.sh [OUTDIR]        OUTDIR defaults to docs/validation
# The host's torch may be built for another CUDA than the image's 11.8, so the expected CUDA is
# EXPECT_CUDA if set, else the host torch's own build (say so when committing the report).
# Extra options for validate-cuda go in VALIDATE_CUDA_ARGS. Exit status: validate-cuda's.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/docs/validation}
py=${PYTHON:-python3}
mkdir -p "$out"
probe='import torch; print(torch.version.cuda or "", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no-gpu", sep="|")'
info=$("$py" -c "$probe" 2>/dev/null || echo "|no-torch")
expect=${EXPECT_CUDA:-${info%%|*}}
gpu=$(printf '%s' "${info#*|}" | tr -c 'A-Za-z0-9.\n-' '-')
name="$out/$(date -u +%Y%m%dT%H%M%SZ)-$gpu"
args=(--report "$name.json")
if [ -n "$expect" ]; then args+=(--expect-cuda "$expect"); fi
# shellcheck disable=SC2206  # word splitting of the extra options is intended
args+=(${VALIDATE_CUDA_ARGS:-})
set +e
"$py" "$repo/scripts/validate-cuda" "${args[@]}" 2>&1 | tee "$name.txt"
rc=${PIPESTATUS[0]}
set -e
echo "gpu-check: exit status $rc; table in $name.txt"
exit "$rc"
