#!/bin/sh
# Merges the active lines of avahi-daemon.conf.snippet into avahi-daemon.conf (avahi 0.8
# has no conf.d). Idempotent: a key already present (active or commented out) in its
# section is replaced in place, other active copies of it are dropped, missing keys and
# sections are appended. Keeps a one-time backup <conf>.orig-discovery-proxy.
#   apply-avahi-settings.sh [--conf FILE] [--interfaces eth1,eth2] [--dry-run]
# Prints "changed" or "unchanged"; restart avahi-daemon after a change.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
conf=/etc/avahi/avahi-daemon.conf
interfaces=
dry_run=no
while [ $# -gt 0 ]; do
    case $1 in
        --conf) conf=$2; shift 2 ;;
        --interfaces) interfaces=$2; shift 2 ;;
        --dry-run) dry_run=yes; shift ;;
        *) echo "usage: $0 [--conf FILE] [--interfaces IF1,IF2] [--dry-run]" >&2; exit 2 ;;
    esac
done
[ -f "$conf" ] || { echo "apply-avahi-settings: $conf not found (is avahi-daemon installed?)" >&2; exit 1; }

# "section<TAB>key<TAB>value" for every active line of the snippet.
settings=$(awk -F= '
    /^\[/ { gsub(/[][ \t]/, ""); section = $0; next }
    /^[ \t]*[a-z]/ { k = $1; v = substr($0, index($0, "=") + 1); gsub(/[ \t]/, "", k); print section "\t" k "\t" v }
' "$here/avahi-daemon.conf.snippet")
if [ -n "$interfaces" ]; then
    # avahi-daemon 0.8 reads its configuration in 256-byte lines: a longer one is cut, the
    # rest has no "=", and the daemon does not start ("Missing assignment").
    line="allow-interfaces=$interfaces"
    if [ ${#line} -gt 254 ]; then
        echo "apply-avahi-settings: allow-interfaces for these interfaces would be ${#line} characters, and avahi-daemon 0.8 reads at most 254 per line (it would not start: \"Missing assignment\"); leave --interfaces out, so that avahi-daemon uses every interface, and keep it off the uplink with deny-interfaces=<uplink> under [server]" >&2
        exit 2
    fi
    settings=$(printf '%s\nserver\tallow-interfaces\t%s' "$settings" "$interfaces")
fi

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
printf '%s\n' "$settings" | awk -F'\t' '
    NR == FNR { want[$1, $2] = $3; order[++n] = $1 SUBSEP $2; next }
    function flush(sec,   i, parts) {
        for (i = 1; i <= n; i++) {
            split(order[i], parts, SUBSEP)
            if (parts[1] == sec && !((sec, parts[2]) in done)) { print parts[2] "=" want[sec, parts[2]]; done[sec, parts[2]] = 1 }
        }
    }
    /^[ \t]*\[/ { flush(section); s = $0; gsub(/[][ \t]/, "", s); section = s; seen[s] = 1; print; next }
    {
        line = $0; active = (line !~ /^[ \t]*[#;]/)
        sub(/^[ \t]*[#;]*[ \t]*/, "", line)
        eq = index(line, "="); key = eq ? substr(line, 1, eq - 1) : ""; gsub(/[ \t]/, "", key)
        if (key != "" && (section, key) in want) {
            if (!((section, key) in done)) { print key "=" want[section, key]; done[section, key] = 1; next }
            if (active) next      # a second active copy would override ours
        }
        print
    }
    END {
        flush(section)
        for (i = 1; i <= n; i++) {
            split(order[i], parts, SUBSEP)
            if (!(parts[1] in seen)) { print ""; print "[" parts[1] "]"; seen[parts[1]] = 1; flush(parts[1]) }
        }
    }
' - "$conf" > "$tmp"

if cmp -s "$tmp" "$conf"; then echo unchanged; exit 0; fi
if [ "$dry_run" = yes ]; then diff -u "$conf" "$tmp" || true; echo "changed (dry run, nothing written)"; exit 0; fi
[ -e "$conf.orig-discovery-proxy" ] || cp -p "$conf" "$conf.orig-discovery-proxy"
cat "$tmp" > "$conf"     # keeps the file's owner and mode
echo changed
