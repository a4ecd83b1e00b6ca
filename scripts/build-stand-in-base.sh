#!/usr/bin/env bash
# Build a local Debian 12 image that stands in for NVIDIA's CUDA base where no
# registry is reachable (CI, air-gapped hosts). Idempotent: skips if present.
set -euo pipefail
image=${1:-local/bookworm:base}
docker=${DOCKER:-docker}
if "$docker" image inspect "$image" >/dev/null 2>&1; then
  echo "stand-in base $image already present"
  exit 0
fi
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
debootstrap --variant=minbase bookworm "$rootfs" http://deb.debian.org/debian >/dev/null
# debootstrap leaves its downloaded packages and lists behind (about 80 MB): not for an image
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | "$docker" import - "$image" >/dev/null
echo "built stand-in base $image"
