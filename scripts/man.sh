#!/usr/bin/env bash
# Writes the manual pages into man/ (they are committed, so that packages and `man -l` need
# no build):
#   discovery-proxy.8, dnssd-browse.1  from the executables' own --help, through
#                                      swift-argument-parser's generate-manual plugin, with
#                                      the sections of scripts/man/*.tail appended;
#   discovery-proxy.yaml.5             from the commented example config/discovery-proxy.yaml.
# --check: regenerate into a temporary directory, fail if man/ differs (the .Dd date aside)
# or if `man --warnings` has anything to say about a page. scripts/test.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."

check=no
[ "${1:-}" = --check ] && check=yes
out=man
if [ "$check" = yes ]; then out=$(mktemp -d); trap 'rm -rf "$out"' EXIT; fi
date=$(git log -1 --format=%cs 2>/dev/null || date +%F)

scratch=${SWIFTPM_SCRATCH_PATH:-.build}
swift package --scratch-path "$scratch" --allow-writing-to-package-directory generate-manual \
    --configuration debug --date "$date" --section 8 >/dev/null
generated=$scratch/plugins/GenerateManual/outputs
# The generator lists a "subcommand" argument even for a command without subcommands, and
# leaves blank lines (paragraph breaks of --help) that mdoc warns about.
finish() { # generated page, section, tail, destination
    sed -e '/^\.Ar subcommand$/d' -e 's/^$/.Pp/' -e "s/^\.Dt \([A-Z-]*\) [0-9]/.Dt \1 $2/" "$1"
    cat "$3"
}
mkdir -p "$out"
finish "$generated/discovery-proxy/discovery-proxy.8" 8 scripts/man/discovery-proxy.8.tail >"$out/discovery-proxy.8"
finish "$generated/dnssd-browse/dnssd-browse.8" 1 scripts/man/dnssd-browse.1.tail >"$out/dnssd-browse.1"
/usr/bin/python3 scripts/man/config-to-mdoc.py config/discovery-proxy.yaml "$date" >"$out/discovery-proxy.yaml.5"

status=0
for page in "$out"/discovery-proxy.8 "$out"/dnssd-browse.1 "$out"/discovery-proxy.yaml.5; do
    warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null || true)
    if [ -n "$warnings" ]; then
        echo "man: $(basename "$page"): $warnings" >&2
        status=1
    fi
done
if [ "$check" = yes ]; then
    for page in discovery-proxy.8 dnssd-browse.1 discovery-proxy.yaml.5; do
        if ! diff -u <(grep -v '^\.Dd ' "man/$page") <(grep -v '^\.Dd ' "$out/$page") >&2; then
            echo "man/$page is out of date: run scripts/man.sh and commit the result" >&2
            status=1
        fi
    done
    [ "$status" -eq 0 ] && echo "manual pages up to date, no warnings"
fi
exit "$status"
