#!/usr/bin/env bash
# Performance benchmark of the discovery proxy (docs/BENCHMARKS.md), in the namespace lab.
# Usage: sudo bash scripts/bench.sh [--smoke] [--json OUT] [--proxy-bin PATH] [--profile DIR] [--only ROWS] [--deb PATH]
#        [--links N] [--srp-hosts N] [--srp-growth-seconds S]
# Set DPT_LAB_ID to run beside another lab (the test suite, another benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/bench.sh must run as root (network namespaces)" >&2
    exit 1
fi
for tool in dnsperf knotd nsd avahi-daemon dbus-daemon; do
    command -v "$tool" >/dev/null || { echo "bench: $tool not found (apt-get install knot nsd dnsperf avahi-daemon dbus)" >&2; exit 1; }
done
# Debian's python3 has dnspython and zeroconf; a pyenv python3 on PATH does not.
PYTHONDONTWRITEBYTECODE=1 exec /usr/bin/python3 scripts/bench/bench.py "$@"
