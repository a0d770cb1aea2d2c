#!/usr/bin/env bash
# Runs the discovery proxy with the default configuration on this machine (Debian).
#   scripts/run-proxy.sh                      # serve the default-route interface
#   scripts/run-proxy.sh --link eth1=lab1.example.com. --listen 0.0.0.0:5300
# Installs the build and runtime packages if missing, starts dbus and avahi-daemon if they
# are not running, builds a release binary and runs it in the foreground (Ctrl-C stops it).
# Environment: LINK_DOMAIN (default <iface>.home.arpa.), CONFIG (default config/discovery-proxy.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "run-proxy: run as root (it installs packages, starts avahi-daemon and binds port 53)" >&2
    exit 1
fi

packages=(libldns-dev libavahi-client-dev avahi-daemon dbus pkg-config)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    echo "run-proxy: installing ${missing[*]}" >&2
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

# The system bus, then avahi-daemon on it (no systemd needed, e.g. in a container).
if ! dbus-send --system --dest=org.freedesktop.DBus --print-reply / org.freedesktop.DBus.GetId >/dev/null 2>&1; then
    echo "run-proxy: starting dbus-daemon --system" >&2
    mkdir -p /run/dbus
    rm -f /run/dbus/pid
    dbus-daemon --system --fork
fi
if ! avahi-daemon --check 2>/dev/null; then
    echo "run-proxy: starting avahi-daemon" >&2
    avahi-daemon --daemonize
    for _ in $(seq 50); do avahi-daemon --check 2>/dev/null && break; sleep 0.1; done
fi

swift build -c release --product discovery-proxy >&2
binary="$(swift build -c release --show-bin-path)/discovery-proxy"

args=(--config "${CONFIG:-config/discovery-proxy.yaml}")
if ! printf '%s\n' "$@" | grep -q -- '^--link'; then
    iface="$(ip -o route show default 2>/dev/null | awk '{for (i=1;i<NF;i++) if ($i=="dev") {print $(i+1); exit}}')"
    if [ -z "$iface" ]; then
        iface="$(ip -o link show up | awk -F': ' '$2 != "lo" {sub(/@.*/, "", $2); print $2; exit}')"
    fi
    if [ -z "$iface" ]; then
        echo "run-proxy: no network interface found; pass --link IFACE=DOMAIN" >&2
        exit 1
    fi
    args+=(--link "$iface=${LINK_DOMAIN:-$iface.home.arpa.}")
    echo "run-proxy: serving interface $iface as ${LINK_DOMAIN:-$iface.home.arpa.}" >&2
fi
exec "$binary" "${args[@]}" "$@"
