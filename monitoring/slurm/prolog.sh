#!/usr/bin/env bash
# Slurm Prolog: refuse a job at its start on a node whose storage diskinfo reports as saturated.
#
# Prefer healthcheck.py (HealthCheckProgram, docs/cluster.md): it drains with the reason in
# words and resumes the node by itself once the storage is calm. This Prolog is the hard gate
# for sites that must not start a single job on a saturated node, at a price: a Prolog that
# exits non-zero drains the node with reason "Prolog error", which stays until an admin (or
# nothing: the health check resumes only its own drains) runs
# `scontrol update NodeName=... State=RESUME`, and the job is requeued only where requeue is on.
#
# slurm.conf:  Prolog=/etc/slurm/prolog.d/diskinfo.sh
#
# Environment (all optional):
#   DISKINFO                 the diskinfo command (default: diskinfo on PATH)
#   DISKINFO_STATUS_URL      the monitor's /status (default: 127.0.0.1, $METRICS_PORT or 9101)
#   DISKINFO_BLOCK_ON        busy | saturated (default saturated): the level that blocks a job
#   DISKINFO_PROLOG_STRICT   1: also block when the monitor cannot be reached (default 0:
#                            a node without a running monitor is not punished for it)
#   DISKINFO_TIMEOUT         seconds to wait for the monitor (default 3)
# Exit: 0 the job may start here, 1 it may not.
set -u

diskinfo=${DISKINFO:-diskinfo}
block_on=${DISKINFO_BLOCK_ON:-saturated}
strict=${DISKINFO_PROLOG_STRICT:-0}
timeout=${DISKINFO_TIMEOUT:-3}
job=${SLURM_JOB_ID:-?}
node=${SLURMD_NODENAME:-$(hostname)}

case $block_on in
  busy | saturated) ;;
  *)
    echo "diskinfo prolog: DISKINFO_BLOCK_ON must be busy or saturated, not '$block_on'" >&2
    exit 1
    ;;
esac

args=(status --fail-on "$block_on" --timeout "$timeout")
if [[ -n ${DISKINFO_STATUS_URL:-} ]]; then
  args+=(--url "$DISKINFO_STATUS_URL")
fi

err=$(mktemp) || exit 1
trap 'rm -f "$err"' EXIT
status=$("$diskinfo" "${args[@]}" 2>"$err")
rc=$?

case $rc in
  0)
    exit 0
    ;;
  3)
    echo "diskinfo prolog: job $job refused on $node: storage pressure at or above $block_on" >&2
    printf '%s\n' "$status" >&2
    exit 1
    ;;
  *)
    echo "diskinfo prolog: cannot check storage pressure on $node: $(head -n 1 "$err")" >&2
    if [[ $strict == 1 ]]; then
      exit 1
    fi
    exit 0
    ;;
esac
