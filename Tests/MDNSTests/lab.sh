#!/bin/sh
# Two-namespace mDNS lab for the AvahiBackend tests (run as root).
#
#   mdv-r (router, runs the proxy side)  v-r 192.0.2.1/24 2001:db8:1::1/64
#     | veth
#   mdv-l (far link, publishes services)  v-l 192.0.2.10/24 2001:db8:1::10/64
#
# Each namespace gets a private dbus-daemon (unix:path=$LAB/<ns>-bus) and avahi-daemon.
# mdv-l publishes the static services in $LAB/l-services (an _ipp._tcp printer whose
# instance name has a dot, a space and UTF-8).
#
#   sh lab.sh up       build the lab, print the PIDs (also in $LAB/pids)
#   sh lab.sh down     kill the lab's processes by PID and delete the namespaces
#   sh lab.sh restart-avahi   kill and restart avahi-daemon in mdv-r
#   sh lab.sh restart-dbus    kill and restart dbus-daemon (and so avahi-daemon) in mdv-r
#
# Then: ip netns exec mdv-r env DBUS_SYSTEM_BUS_ADDRESS=unix:path=$LAB/r-bus \
#         MDNS_TEST_INTERFACE=v-r swift test --filter MDNSTests
set -eu
LAB=${LAB:-/tmp/mdv}

start_dbus() { # ns
    sed -e "s|<listen>.*</listen>|<listen>unix:path=$LAB/$1-bus</listen>|" \
        -e '/<pidfile>/d' -e '/<user>/d' -e '/<standard_system_servicedirs\/>/d' \
        -e 's|<includedir>system.d</includedir>|<includedir>/usr/share/dbus-1/system.d</includedir>|' \
        /usr/share/dbus-1/system.conf > "$LAB/$1-dbus.conf"
    ip netns exec "mdv-$1" dbus-daemon --config-file="$LAB/$1-dbus.conf" --nofork --nopidfile \
        > "$LAB/$1-dbus.log" 2>&1 &
    echo "$!" > "$LAB/$1-dbus.pid"
    for _ in 1 2 3 4 5 6 7 8 9 10; do [ -S "$LAB/$1-bus" ] && return 0; sleep 0.2; done
    echo "dbus-daemon in mdv-$1 did not start" >&2; return 1
}

start_avahi() { # ns iface
    cat > "$LAB/$1-avahi.conf" <<EOF
[server]
host-name=mdv-$1
domain-name=local
use-ipv4=yes
use-ipv6=yes
allow-interfaces=$2
enable-dbus=yes
ratelimit-interval-usec=1000000
ratelimit-burst=1000
[wide-area]
enable-wide-area=no
[publish]
publish-hinfo=no
publish-workstation=no
publish-addresses=yes
[reflector]
[rlimits]
EOF
    mkdir -p "$LAB/$1-services"
    ip netns exec "mdv-$1" env DBUS_SYSTEM_BUS_ADDRESS="unix:path=$LAB/$1-bus" sh -c "
        mkdir -p /run/avahi-daemon && mount -t tmpfs none /run/avahi-daemon
        mount --bind '$LAB/$1-services' /etc/avahi/services
        rm -f /run/avahi-daemon/pid
        exec avahi-daemon --no-chroot --no-drop-root --no-rlimits -f '$LAB/$1-avahi.conf'" \
        > "$LAB/$1-avahi.log" 2>&1 &
    echo "$!" > "$LAB/$1-avahi.pid"
}

stop() { # pidfile: kill the process if it is still ours (pids get reused)
    [ -f "$1" ] || return 0
    pid=$(cat "$1"); rm -f "$1"
    case "$(cat "/proc/$pid/comm" 2>/dev/null)" in avahi-daemon|dbus-daemon) ;; *) return 0 ;; esac
    kill "$pid" 2>/dev/null || true
    sleep 1
    # SIGKILL too: a parent may have started it with SIGTERM blocked.
    kill -9 "$pid" 2>/dev/null || true
}

case "${1:-up}" in
up)
    mkdir -p "$LAB"
    ip netns add mdv-r
    ip netns add mdv-l
    ip link add v-r netns mdv-r type veth peer name v-l netns mdv-l
    ip -n mdv-r link set lo up
    ip -n mdv-l link set lo up
    ip -n mdv-r addr add 192.0.2.1/24 dev v-r
    ip -n mdv-r addr add 2001:db8:1::1/64 dev v-r nodad
    ip -n mdv-l addr add 192.0.2.10/24 dev v-l
    ip -n mdv-l addr add 2001:db8:1::10/64 dev v-l nodad
    ip -n mdv-r link set v-r up multicast on
    ip -n mdv-l link set v-l up multicast on
    mkdir -p "$LAB/l-services"
    cat > "$LAB/l-services/printer.service" <<'EOF'
<?xml version="1.0" standalone='no'?>
<!DOCTYPE service-group SYSTEM "avahi-service.dtd">
<service-group>
  <name>Dot.ted Printer ü</name>
  <service>
    <type>_ipp._tcp</type>
    <port>631</port>
    <txt-record>rp=printers/lab</txt-record>
    <txt-record>note=Lab Ü</txt-record>
  </service>
</service-group>
EOF
    start_dbus r
    start_dbus l
    start_avahi r v-r
    start_avahi l v-l
    sleep 2
    echo "pids: $(cat "$LAB"/*.pid | tr '\n' ' ')" | tee "$LAB/pids"
    ;;
restart-avahi)
    stop "$LAB/r-avahi.pid"
    sleep "${2:-2}"
    start_avahi r v-r
    ;;
restart-dbus)
    # avahi-daemon exits when it loses D-Bus (systemd would restart it): restart both.
    stop "$LAB/r-dbus.pid"
    stop "$LAB/r-avahi.pid"
    rm -f "$LAB/r-bus"
    sleep "${2:-2}"
    start_dbus r
    start_avahi r v-r
    ;;
down)
    for f in "$LAB"/*.pid; do stop "$f"; done
    ip netns del mdv-r 2>/dev/null || true
    ip netns del mdv-l 2>/dev/null || true
    ;;
esac
