#!/usr/bin/env bash
# Write the deployable Alertmanager config: alertmanager.yml on stdin with its
# @WECOM_API_SECRET@ replaced by the secret read from SECRET_FILE, on stdout. Alertmanager 0.25
# (Debian 12) reads the secret from its config only, so the secret lives in a root-only file
# and in the rendered config (keep that one 0640 root:prometheus), never in the repository.
#   render.sh /etc/prometheus/wecom-secret < alertmanager.yml > /etc/prometheus/alertmanager.yml
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: render.sh SECRET_FILE < alertmanager.yml > deployed.yml" >&2
  exit 2
fi
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
printf '%s\n' "${config//@WECOM_API_SECRET@/"$secret"}"
