#!/usr/bin/env bash
# The figures docs/image.md records: size each layer adds, build time cold (no layer cache)
# and after a code-only change, and seconds from `docker run` to Jupyter answering.
#   scripts/measure-image.sh [IMAGE]    (make build's variables are taken from the environment)
# Uses a copy of the build context for the code-only change, so the working tree is untouched.
set -euo pipefail
image=${1:-pytorch-cuda-diskinfo:measure}
docker=${DOCKER:-docker}
make_vars=(DOCKER="$docker" BASE_IMAGE="${BASE_IMAGE:-local/bookworm:base}"
  WHEELHOUSE="${WHEELHOUSE:-/opt/wheels}" TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
  CA_BUNDLE="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}")
cd "$(dirname "$0")/.."

seconds() { local s=$SECONDS; "$@" >/dev/null 2>&1; echo $((SECONDS - s)); }

echo "== cold build (no layer cache; BuildKit's apt/pip download caches as they are)"
echo "seconds: $(seconds make build "${make_vars[@]}" IMAGE="$image" BUILD_ARGS=--no-cache)"

echo "== rebuild after a code-only change (one line added to src/diskinfo/__init__.py)"
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp -a Dockerfile .dockerignore pyproject.toml README.md src docker scripts entrypoint.sh "$ctx"/
build_copy() {
  DOCKER_BUILDKIT=1 "$docker" build --network host -q \
    --build-arg BASE_IMAGE="${BASE_IMAGE:-local/bookworm:base}" \
    --build-arg TORCH_VERSION="${TORCH_VERSION:-2.13.0}" --build-arg TORCHVISION_VERSION= \
    --build-arg TORCHAUDIO_VERSION= -t "$image-code" "$ctx" >/dev/null
}
build_copy # the copy as it is: warms the context transfer and the copy's last layers
echo "# code-only change $(date +%s)" >>"$ctx/src/diskinfo/__init__.py"
echo "seconds: $(seconds build_copy)"
"$docker" rmi "$image-code" >/dev/null

echo "== size each layer adds (newest first)"
"$docker" history --format '{{.Size}}\t{{.CreatedBy}}' "$image" | grep -v '^0B' | cut -c1-110
"$docker" image inspect --format 'total: {{.Size}} bytes' "$image"

echo "== docker run -> Jupyter /api/status answering (3 runs)"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for _ in 1 2 3; do
  start=$(date +%s.%N)
  cid=$("$docker" run -d --network host -e JUPYTER_PORT="$port" -e JUPYTER_TOKEN=measure \
    -e SSH_PORT=0 -e METRICS_PORT=0 "$image")
  until curl -fs -o /dev/null "http://127.0.0.1:$port/api/status?token=measure"; do sleep 0.1; done
  python3 -c "print(f'seconds: {$(date +%s.%N) - $start:.1f}')"
  "$docker" rm -f "$cid" >/dev/null
done
