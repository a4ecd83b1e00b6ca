#!/usr/bin/env bash
# Write the deployable Alertmanager config: alertmanager.yml on stdin with its
# @WECOM_API_SECRET@ replaced by the secret read from SECRET_FILE. Alertmanager 0.25
# (Debian 12) reads the secret from its config only, so the secret lives in a root-only file
# and in the rendered config (0640 root:prometheus), never in the repository.
#   render.sh --out /etc/prometheus/alertmanager.yml --group prometheus \
#     /etc/prometheus/wecom-secret < alertmanager.yml
# With --out the config is written to a new file in OUT's folder that is 0600 from its creation
# (mktemp: whatever the shell's umask), given --group's group and 0640, and renamed over OUT
# only once it is whole: a failed render leaves OUT as it was. Without --out it goes to stdout
# (for a pipe; `> file` would create the file with the umask and empty it on failure).
set -euo pipefail

usage() {
  echo "usage: render.sh [--out DEPLOYED.yml [--group GROUP]] SECRET_FILE < alertmanager.yml" >&2
  exit 2
}
out="" group=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --out) [[ $# -ge 2 ]] || usage; out=$2; shift 2 ;;
    --group) [[ $# -ge 2 ]] || usage; group=$2; shift 2 ;;
    --) shift; break ;;
    -*) usage ;;
    *) break ;;
  esac
done
[[ $# -eq 1 ]] || usage
[[ -z $group || -n $out ]] || usage
if [[ ! -r $1 ]]; then
  echo "render.sh: cannot read the secret file $1" >&2
  exit 1
fi
secret=$(head -n 1 -- "$1")
secret=${secret%$'\r'}
if [[ -z $secret ]]; then
  echo "render.sh: the secret file $1 is empty" >&2
  exit 1
fi
# the placeholder sits in double quotes: a secret with a quote or backslash would break them
if [[ $secret == *[\"\\]* ]]; then
  echo "render.sh: the secret in $1 holds a quote or backslash; WeCom secrets never do" >&2
  exit 1
fi
config=$(cat)
if [[ $config != *@WECOM_API_SECRET@* ]]; then
  echo "render.sh: no @WECOM_API_SECRET@ placeholder on stdin" >&2
  exit 1
fi
# the replacement quoted: bash 5.2 would otherwise put the placeholder back for each &
rendered=${config//@WECOM_API_SECRET@/"$secret"}
if [[ -z $out ]]; then
  printf '%s\n' "$rendered"
  exit 0
fi
tmp=$(mktemp -- "$(dirname -- "$out")/.render.XXXXXX") || {
  echo "render.sh: cannot create a file beside $out" >&2
  exit 1
}
trap 'rm -f -- "$tmp"' EXIT
printf '%s\n' "$rendered" >"$tmp"
if [[ -n $group ]]; then
  chgrp -- "$group" "$tmp"
  chmod 0640 -- "$tmp"
fi
mv -f -- "$tmp" "$out"
trap - EXIT
