#!/usr/bin/env bash
# Soak test: steady mixed UDP/TCP load while far-link services come and go, every answer
# checked against what is published (scripts/soak.py has the details). Needs root (the
# network-namespace lab). Builds the debug proxy unless DISCOVERY_PROXY_BIN is set.
#
#   sudo bash scripts/soak.sh --minutes 30                 # the full soak (docs/RELIABILITY.md)
#   sudo bash scripts/soak.sh --minutes 2 --max-rss-growth 0   # the CI version (scripts/test.sh)
#
# Other flags go to soak.py: --rate Q/S, --pool N, --churn SECONDS, --warmup SECONDS,
# --max-rss-growth PCT, --max-error-pct PCT, --seed N, --report FILE.json.
# DPT_LAB_ID (default "soak") names the lab's namespaces, so a soak can run beside other labs.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/soak.sh must run as root (network namespaces)" >&2
    exit 1
fi
if [ -z "${DISCOVERY_PROXY_BIN:-}" ]; then
    scratch="${SWIFTPM_SCRATCH_PATH:-.build}"
    swift build --scratch-path "$scratch" --product discovery-proxy
    export DISCOVERY_PROXY_BIN="$scratch/debug/discovery-proxy"
fi
export DPT_LAB_ID="${DPT_LAB_ID:-soak}"
exec /usr/bin/python3 scripts/soak.py "$@"
