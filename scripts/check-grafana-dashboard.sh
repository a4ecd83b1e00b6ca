#!/usr/bin/env bash
# monitoring/grafana/dashboard.json against Grafana's own schema: @grafana/schema's Dashboard
# type, compiled with TypeScript's tsc (versions pinned in monitoring/grafana/schema/). No
# Grafana server runs here; this catches what Grafana's loader would drop or refuse (a
# misspelt property, a value of the wrong type, a missing required field). Part of `make lint`;
# needs node and npm (Debian's nodejs and npm), and the npm registry the first time.
#   check-grafana-dashboard.sh [DASHBOARD]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dashboard=${1:-$root/monitoring/grafana/dashboard.json}
schema=$root/monitoring/grafana/schema
work=$root/build/grafana-schema
command -v npm >/dev/null || { echo "check-grafana-dashboard: npm is missing (apt-get install nodejs npm)" >&2; exit 1; }
mkdir -p "$work"
cp "$schema"/package.json "$schema"/package-lock.json "$schema"/tsconfig.json "$schema"/check.ts "$work"/
# the pinned packages, installed again only when the lock file changed
if ! cmp -s "$work/package-lock.json" "$work/node_modules/.package-lock.json.installed" 2>/dev/null; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$work/package-lock.json" "$work/node_modules/.package-lock.json.installed"
fi
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$dashboard" \
  || { echo "check-grafana-dashboard: $dashboard is not JSON" >&2; exit 1; }
{
  echo 'import type { DashboardJson } from "./check.js";'
  printf 'export const dashboard = %s satisfies DashboardJson;\n' "$(cat "$dashboard")"
} >"$work/dashboard.ts"
if ! (cd "$work" && ./node_modules/.bin/tsc -p tsconfig.json); then
  echo "check-grafana-dashboard: $dashboard does not match @grafana/schema's Dashboard" \
    "(lines above are of $work/dashboard.ts: line 2 on is the JSON)" >&2
  exit 1
fi
echo "$dashboard matches @grafana/schema $(cd "$work" && node -p 'require("@grafana/schema/package.json").version')'s Dashboard"
