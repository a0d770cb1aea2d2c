#!/usr/bin/env bash
# Runs the discovery proxy on this machine (Debian, as root), in the foreground (Ctrl-C stops).
#   scripts/run-proxy.sh                                   # serve every interface but the uplink
#   scripts/run-proxy.sh --link eth1=lab1.example.com. --listen 0.0.0.0:5300
# Any flag of discovery-proxy works. What it does:
#  1. installs the build and runtime packages if missing;
#  2. starts dbus and avahi-daemon if they are not running, and applies the avahi-daemon
#     settings the proxy needs (deploy/avahi/apply-avahi-settings.sh; a backup is kept);
#  3. builds discovery-proxy and dnssd-browse (release; about 10 minutes the first time);
#  4. without --link, serves each interface that is up, has an address and carries no default
#     route (on a router: the LAN sides, never the uplink) as <iface>.home.arpa.;
#  5. prints what to try, then runs the proxy.
# Environment: CONFIG (default config/discovery-proxy.yaml), LINK_DOMAIN (a domain for a
# single chosen interface), DISCOVERY_PROXY_BIN (use this binary, skip the build).
# --dry-run: print the choices and the command, change nothing, run nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "run-proxy: $*" >&2; }

dry_run=no
args=()
for a in "$@"; do
    if [ "$a" = --dry-run ]; then dry_run=yes; else args+=("$a"); fi
done
set -- ${args[@]+"${args[@]}"}

if [ "$(id -u)" -ne 0 ]; then
    say "run as root (it installs packages, starts avahi-daemon and binds port 53); on Debian: su -c scripts/run-proxy.sh"
    exit 1
fi

if [ "$dry_run" = no ]; then
    packages=(libldns-dev libavahi-client-dev libyaml-dev libssl-dev libsqlite3-dev avahi-daemon dbus pkg-config)
    missing=()
    for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing ${missing[*]}"
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
    fi
fi

# The interfaces to serve: up, not loopback, with an address that is not link-local, and no
# default route through them. Prints one name per line.
lan_interfaces() {
    local uplinks
    uplinks=$( { ip -4 route show default; ip -6 route show default; } 2>/dev/null |
        awk '{for (i = 1; i < NF; i++) if ($i == "dev") print $(i + 1)}' | sort -u)
    ip -o addr show scope global up 2>/dev/null | awk '{print $2}' | sed 's/@.*//' | sort -u |
        while read -r iface; do
            case $iface in lo | docker* | veth* | virbr*) continue ;; esac
            grep -qx "$iface" <<<"$uplinks" && continue
            echo "$iface"
        done
}

has_link=no
listen=""
for ((i = 1; i <= $#; i++)); do
    case ${!i} in
        --link | --link=*) has_link=yes ;;
        --listen) j=$((i + 1)); [ -z "$listen" ] && listen=${!j} ;;
        --listen=*) [ -z "$listen" ] && listen=${!i#--listen=} ;;
    esac
done
config=${CONFIG:-config/discovery-proxy.yaml}
cmd=(--config "$config")
zones=()
if [ "$has_link" = no ] && ! grep -qE '^[[:space:]]*-[[:space:]]*interface:' "$config" 2>/dev/null; then
    mapfile -t chosen < <(lan_interfaces)
    if [ ${#chosen[@]} -eq 0 ]; then
        uplink=$(ip -o route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i + 1); exit}}')
        say "no interface to serve: ${uplink:+$uplink carries the default route (the uplink, never served by default) and }no other interface is up with an address; pass the one facing the subnet to serve: scripts/run-proxy.sh --link IFACE=DOMAIN"
        exit 1
    fi
    if [ -n "${LINK_DOMAIN:-}" ] && [ ${#chosen[@]} -gt 1 ]; then
        say "LINK_DOMAIN names one domain, but ${#chosen[@]} interfaces were chosen (${chosen[*]}); pass --link IFACE=DOMAIN for each"
        exit 1
    fi
    for iface in "${chosen[@]}"; do
        zone=${LINK_DOMAIN:-$iface.home.arpa.}
        cmd+=(--link "$iface=$zone")
        zones+=("$zone")
        say "serving interface $iface as $zone"
    done
else
    for ((i = 1; i <= $#; i++)); do
        case ${!i} in
            --link) j=$((i + 1)); zones+=("${!j#*=}") ;;
            --link=*) v=${!i#--link=}; zones+=("${v#*=}") ;;
        esac
    done
fi
links=$(printf '%s\n' "${cmd[@]}" "$@" | awk 'prev == "--link" {split($0, p, "="); printf "%s%s", sep, p[1]; sep = ","} {prev = $0}')

if [ "$dry_run" = no ]; then
    # The system bus, then avahi-daemon on it (no systemd needed, e.g. in a container).
    if ! dbus-send --system --dest=org.freedesktop.DBus --print-reply / org.freedesktop.DBus.GetId >/dev/null 2>&1; then
        say "starting dbus-daemon --system"
        mkdir -p /run/dbus
        rm -f /run/dbus/pid
        dbus-daemon --system --fork
    fi
    # What the proxy needs of avahi-daemon: the links' interfaces, D-Bus, enough objects per
    # client, no reflector, no wide-area (deploy/avahi/avahi-daemon.conf.snippet).
    changed=$(sh deploy/avahi/apply-avahi-settings.sh ${links:+--interfaces "$links"})
    if [ "$changed" = changed ]; then
        say "applied the avahi-daemon settings the proxy needs to /etc/avahi/avahi-daemon.conf${links:+ (allow-interfaces=$links)}; the old file is /etc/avahi/avahi-daemon.conf.orig-discovery-proxy"
        if avahi-daemon --check 2>/dev/null; then
            say "restarting avahi-daemon to apply them"
            if [ -d /run/systemd/system ]; then systemctl restart avahi-daemon; else avahi-daemon --kill; sleep 0.5; fi
        fi
    fi
    if ! avahi-daemon --check 2>/dev/null; then
        say "starting avahi-daemon"
        avahi-daemon --daemonize
        for _ in $(seq 50); do avahi-daemon --check 2>/dev/null && break; sleep 0.1; done
    fi
fi

if [ -n "${DISCOVERY_PROXY_BIN:-}" ]; then
    binary=$DISCOVERY_PROXY_BIN
    browse="$(dirname "$binary")/dnssd-browse"
else
    bin_dir=$(swift build -c release --show-bin-path)
    binary=$bin_dir/discovery-proxy
    browse=$bin_dir/dnssd-browse
    if [ "$dry_run" = no ]; then
        [ -x "$binary" ] || say "building discovery-proxy and dnssd-browse (release; a clean build takes about 10 minutes)"
        swift build -c release --product discovery-proxy >&2
        swift build -c release --product dnssd-browse >&2
    fi
fi

# The "try this" block: the first listen address (default port 53) and the admin endpoint.
host=127.0.0.1
port=53
if [ -n "$listen" ]; then
    port=${listen##*:}
    case $listen in
        \[::\]:* | 0.0.0.0:*) ;;
        \[*) host=${listen%%]*}; host=${host#[} ;;
        *) host=${listen%:*} ;;
    esac
fi
at="@$host"
[ "$port" != 53 ] && at="$at -p $port"
zone=${zones[0]:-lab1.example.com.}
{
    echo "run-proxy: starting: $binary ${cmd[*]} $*"
    echo
    echo "  Try this from another terminal:"
    echo "    dig $at +norec $zone SOA                       # the zone's apex: answered at once"
    echo "    dig $at +norec _services._dns-sd._udp.$zone PTR   # the service types on that link"
    echo "    $browse --server $host:$port --types $zone"
    echo "  Status page and metrics: http://127.0.0.1:8053/ (admin: in the config, --admin)"
    echo "  Clients browse these zones once the parent zone delegates them: see README, \"Pointing clients at it\"."
    echo
} >&2
if [ "$dry_run" = yes ]; then exit 0; fi
exec "$binary" "${cmd[@]}" "$@"
