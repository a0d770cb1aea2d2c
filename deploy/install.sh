#!/bin/sh
# Installs discovery-proxy on a systemd host (Debian 12 and similar). Build first:
#   swift build -c release --static-swift-stdlib     # no Swift runtime needed on the router
#   sudo deploy/install.sh [--no-avahi] [--avahi-interfaces eth1,eth2]
# dnssd-browse is installed as a link to discovery-proxy, which runs that command when called
# by that name (as in the Debian package). Re-running upgrades the binary and unit and never
# overwrites an existing /etc/discovery-proxy/discovery-proxy.yaml (the new default goes
# next to it as discovery-proxy.yaml.dist).
# DESTDIR=/tmp/stage deploy/install.sh  stages the files under /tmp/stage only: no root
# needed, and no systemctl or avahi restart.
# Environment: BUILD_DIR (default .build/release), DESTDIR (default empty).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${BUILD_DIR:-$repo/.build/release}
destdir=${DESTDIR:-}
avahi=yes
avahi_interfaces=
while [ $# -gt 0 ]; do
    case $1 in
        --no-avahi) avahi=no; shift ;;
        --avahi-interfaces) avahi_interfaces=$2; shift 2 ;;
        *) echo "usage: $0 [--no-avahi] [--avahi-interfaces IF1,IF2]" >&2; exit 2 ;;
    esac
done
say() { echo "install: $*" >&2; }

if [ -z "$destdir" ] && [ "$(id -u)" -ne 0 ]; then
    say "run as root (or set DESTDIR to stage the files)"; exit 1
fi
if [ ! -x "$build_dir/discovery-proxy" ]; then
    say "$build_dir/discovery-proxy not found: run 'swift build -c release --static-swift-stdlib' first"; exit 1
fi
# A plain 'swift build' links the Swift runtime from the toolchain directory: fine on the
# build host, broken on a router without that toolchain.
if ldd "$build_dir/discovery-proxy" 2>/dev/null | grep -q 'libswiftCore'; then
    say "warning: the binary needs the Swift runtime at $(ldd "$build_dir/discovery-proxy" | awk '/libswiftCore/ {print $3}')"
    say "         rebuild with --static-swift-stdlib to run it where no toolchain is installed"
fi
if ldd "$build_dir/discovery-proxy" 2>/dev/null | grep -q 'not found'; then
    say "missing libraries (install libldns3 libavahi-client3):"; ldd "$build_dir/discovery-proxy" | grep 'not found' >&2; exit 1
fi

install -d -m 0755 "$destdir/usr/local/bin" "$destdir/etc/discovery-proxy" \
    "$destdir/etc/systemd/system" "$destdir/usr/local/share/doc/discovery-proxy"
install -m 0755 "$build_dir/discovery-proxy" "$destdir/usr/local/bin/discovery-proxy"
say "installed /usr/local/bin/discovery-proxy"
ln -sf discovery-proxy "$destdir/usr/local/bin/dnssd-browse"
say "installed /usr/local/bin/dnssd-browse (a link to discovery-proxy)"

# The unit runs as a DynamicUser, so the file must be world-readable (it holds no secrets).
config=$destdir/etc/discovery-proxy/discovery-proxy.yaml
if [ -e "$config" ]; then
    install -m 0644 "$repo/deploy/config/discovery-proxy.yaml" "$config.dist"
    say "kept existing /etc/discovery-proxy/discovery-proxy.yaml; new default in discovery-proxy.yaml.dist"
else
    install -m 0644 "$repo/deploy/config/discovery-proxy.yaml" "$config"
    say "installed /etc/discovery-proxy/discovery-proxy.yaml (add your links before starting)"
fi
install -m 0644 "$repo/deploy/systemd/discovery-proxy.service" "$destdir/etc/systemd/system/discovery-proxy.service"
install -m 0644 "$repo/docs/DEPLOYMENT.md" "$destdir/usr/local/share/doc/discovery-proxy/DEPLOYMENT.md"
say "installed /etc/systemd/system/discovery-proxy.service"

avahi_changed=no
if [ "$avahi" = yes ]; then
    avahi_conf=$destdir/etc/avahi/avahi-daemon.conf
    if [ -f "$avahi_conf" ]; then
        set -- --conf "$avahi_conf"
        [ -n "$avahi_interfaces" ] && set -- "$@" --interfaces "$avahi_interfaces"
        result=$("$repo/deploy/avahi/apply-avahi-settings.sh" "$@")
        say "avahi-daemon.conf: $result"
        [ "$result" = changed ] && avahi_changed=yes
    else
        say "warning: $avahi_conf not found: install avahi-daemon, then run deploy/avahi/apply-avahi-settings.sh"
    fi
fi

if [ -n "$destdir" ]; then
    say "staged under $destdir; skipped systemctl"; exit 0
fi
systemctl daemon-reload
if [ "$avahi_changed" = yes ] && systemctl is-active --quiet avahi-daemon; then
    say "restarting avahi-daemon to apply its new settings"; systemctl restart avahi-daemon
fi
if systemctl is-active --quiet discovery-proxy; then
    systemctl restart discovery-proxy; say "restarted discovery-proxy"
else
    cat >&2 <<NEXT
install: next steps:
  1. edit /etc/discovery-proxy/discovery-proxy.yaml (links, server-name)
  2. discovery-proxy --config /etc/discovery-proxy/discovery-proxy.yaml --check-config
  3. systemctl enable --now discovery-proxy
NEXT
fi
