#!/usr/bin/env bash
# Build a local Debian 12 image that stands in for NVIDIA's CUDA base where no
# registry is reachable (CI, air-gapped hosts). Idempotent: skips if present.
#   build-stand-in-base.sh [IMAGE]       build it (default local/bookworm:base)
#   build-stand-in-base.sh --mirror      print the Debian mirror it would use, and exit
# The mirror is the one this host's apt already uses for bookworm (a corporate mirror or proxy
# may be the only way out), read from /etc/apt/sources.list and sources.list.d (one-line and
# deb822 files); MIRROR=URL overrides; http://deb.debian.org/debian where apt names none.
set -euo pipefail
apt_etc=${APT_ETC:-/etc/apt}  # tests point it at their own files

# apt_mirror: the first enabled `deb` source for the suite bookworm, as apt lists it.
apt_mirror() {
  local file
  for file in "$apt_etc"/sources.list "$apt_etc"/sources.list.d/*.list; do
    [ -r "$file" ] || continue
    # deb [option=value ...] URI SUITE COMPONENT...
    awk '$1 == "deb" {
      i = 2
      if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
      if ($(i + 1) == "bookworm") { print $i; exit }
    }' "$file"
  done
  for file in "$apt_etc"/sources.list.d/*.sources; do
    [ -r "$file" ] || continue
    # stanzas of "Key: value" lines, blank-line separated
    awk 'BEGIN { RS = ""; FS = "\n" }
    {
      types = uris = suites = ""; enabled = "yes"
      for (n = 1; n <= NF; n++) {
        if ($n ~ /^[ \t]*#/) continue
        key = tolower($n); sub(/:.*/, "", key)
        value = $n; sub(/^[^:]*:[ \t]*/, "", value)
        if (key == "types") types = value
        else if (key == "uris") uris = value
        else if (key == "suites") suites = value
        else if (key == "enabled") enabled = tolower(value)
      }
      if (enabled != "no" && (" " types " ") ~ / deb / && (" " suites " ") ~ / bookworm /) {
        split(uris, first, /[ \t]+/); print first[1]; exit
      }
    }' "$file"
  done
}

mirror=${MIRROR:-$(apt_mirror)}
mirror=${mirror%%$'\n'*}  # the first, as apt reads them
mirror=${mirror:-http://deb.debian.org/debian}
if [ "${1:-}" = --mirror ]; then
  echo "$mirror"
  exit 0
fi

image=${1:-local/bookworm:base}
docker=${DOCKER:-docker}
if "$docker" image inspect "$image" >/dev/null 2>&1; then
  echo "stand-in base $image already present"
  exit 0
fi
rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm from $mirror (MIRROR=URL chooses another)"
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
# debootstrap leaves its downloaded packages and lists behind (about 80 MB): not for an image
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | "$docker" import - "$image" >/dev/null
echo "built stand-in base $image"
