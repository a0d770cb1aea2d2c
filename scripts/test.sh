#!/usr/bin/env bash
# Run every test: build, Swift unit tests, then the namespace integration suite.
# Needs root (network namespaces, avahi-daemon, tcpdump). Usage: sudo bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh must run as root (network namespaces)" >&2
    exit 1
fi

# Debian packages the build and the tests need; installed only when missing.
DEPS=(libldns-dev libavahi-client-dev libyaml-dev libssl-dev libsqlite3-dev avahi-daemon avahi-utils dbus dnsutils
      python3-dnspython python3-zeroconf python3-pytest python3-pytest-xdist python3-jsonschema iproute2 nftables iptables libnetfilter-queue1 tcpdump
      pkg-config procps util-linux chromium knot nsd dnsperf
      unbound bind9 knot-resolver pdns-recursor dnsmasq-base man-db groff-base zonemaster-cli dnsviz
      debhelper lintian)
missing=()
for p in "${DEPS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "installing missing packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # The DNS servers (knot, nsd, unbound, bind9, pdns-recursor) would start as services on
    # this host's port 53; the tests start their own inside namespaces. A policy-rc.d that
    # says no keeps them stopped, for the install only (unless the host has one already).
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    apt-get install -y --no-install-recommends "${missing[@]}" ||
        { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; }
    if [ -n "$(trap -p EXIT)" ]; then rm -f "$policy"; trap - EXIT; fi
fi

# SWIFTPM_SCRATCH_PATH (optional) builds elsewhere than .build, e.g. beside another build.
SCRATCH="${SWIFTPM_SCRATCH_PATH:-.build}"
echo "=== docs/ARCHITECTURE.md names only what exists (scripts/check-architecture.py)"
arch_rc=0
python3 scripts/check-architecture.py || arch_rc=$?
echo "=== formatting (swift format lint --strict, the settings in .swift-format)"
format_rc=0
swift format lint --strict --recursive --parallel Sources Tests Package.swift || {
    format_rc=$?
    echo "format: run 'swift format --in-place --recursive Sources Tests Package.swift' and commit the result" >&2
}
# The Debian package, built as users build it (dpkg-buildpackage, release: the package CI
# checks is the one they install, docs/BENCHMARKS.md "Footprint") in .build-deb (debian/rules:
# a static build must not share a scratch path with the dynamic one), checked by lintian, then
# installed, run in the lab, measured and purged by Tests/integration/test_package.py.
echo "=== Debian package (dpkg-buildpackage -b, lintian)"
deb_rc=0
rm -f ../discovery-proxy_*.deb ../discovery-proxy_*.buildinfo ../discovery-proxy_*.changes
env -u SWIFTPM_SCRATCH_PATH DEB_BUILD_OPTIONS="nocheck noddebs" dpkg-buildpackage -b -us -uc >/tmp/dpkg-buildpackage.log 2>&1 ||
    { deb_rc=$?; tail -40 /tmp/dpkg-buildpackage.log; }
deb=$(ls ../discovery-proxy_*_"$(dpkg --print-architecture)".deb 2>/dev/null | head -1)
if [ "$deb_rc" -eq 0 ] && [ -n "$deb" ]; then
    lintian --fail-on error,warning "$deb" || deb_rc=$?
    export DISCOVERY_PROXY_DEB="$PWD/$deb"
else
    echo "no package built" >&2
    deb_rc=1
fi

# The debug build, the manual pages (generated from its --help) and the unit tests. With a
# package, they run beside the integration tests, under SCHED_IDLE (`chrt --idle`: the CPU
# only when nothing else wants it; with `nice -n 19`, the compilers swift-build started ran
# at nice 0 all the same): most of the lab's time is spent waiting on mDNS timers, so the
# compiler takes what the lab leaves, instead of the lab waiting for it. Their output
# follows the lab's.
unit_side() {
    local rc=0
    echo "=== swift build"
    swift build --scratch-path "$SCRATCH" || rc=1
    echo "=== manual pages (scripts/man.sh --check)"
    bash scripts/man.sh --check || echo "man" >>"$unit_failed"
    echo "=== swift test"
    if [ "$rc" -ne 0 ]; then
        echo "not run: the debug build failed (above)" >&2
        echo "unit" >>"$unit_failed"
    else
        swift test --scratch-path "$SCRATCH" || echo "unit" >>"$unit_failed"
    fi
    echo "finished" >>"$unit_failed"
}
unit_failed="$(mktemp /tmp/unit-failed-XXXXXX)"
unit_log="$(mktemp /tmp/unit-side-XXXXXX.log)"
echo "=== integration tests"
# The lab runs the executable the package holds (the same build, before dh_strip: a crash
# names its functions), so the layout the release link gives it (Linking/README.md) is
# what the tests exercise. dnssd-browse is that executable under its other name, as the
# package links it. Without a package, the debug build, built first.
packaged=.build-deb/release/discovery-proxy
unit_pid=""
if [ -z "${DISCOVERY_PROXY_BIN:-}" ] && [ "$deb_rc" -eq 0 ] && [ -x "$packaged" ]; then
    export DISCOVERY_PROXY_BIN="$PWD/$packaged"
    browse_dir="$(mktemp -d /tmp/dnssd-browse-XXXXXX)"
    ln -s "$DISCOVERY_PROXY_BIN" "$browse_dir/dnssd-browse"
    export DNSSD_BROWSE_BIN="${DNSSD_BROWSE_BIN:-$browse_dir/dnssd-browse}"
    echo "(swift build, manual pages and swift test run beside it, at idle priority; their output follows)"
    (chrt --idle -p 0 "$BASHPID" || echo "chrt --idle failed; at normal priority" >&2
     unit_side >"$unit_log" 2>&1) &
    unit_pid=$!
else
    unit_side
fi
export DISCOVERY_PROXY_BIN="${DISCOVERY_PROXY_BIN:-$SCRATCH/debug/discovery-proxy}"
echo "proxy under test: $DISCOVERY_PROXY_BIN"
# Debian's python3 has dnspython/zeroconf/pytest; a pyenv python3 on PATH does not.
# Most of the suite waits on mDNS timers, not the CPU: two pytest-xdist workers, each a lab
# of its own (lab.LAB_ID), halve its time on 2 cores. A test file stays on one worker
# (--dist loadfile): its module fixtures (a proxy, a client namespace) are set up once.
# TEST_WORKERS=0 runs it in one process.
it_rc=0
/usr/bin/python3 -m pytest -v -rfE -p no:cacheprovider -n "${TEST_WORKERS:-2}" --dist loadfile \
    Tests/integration "$@" || it_rc=$?
if [ -n "$unit_pid" ]; then
    echo "=== waiting for swift build, manual pages and swift test (started beside the lab)"
    wait "$unit_pid" || true
    cat "$unit_log"
fi
man_rc=0; unit_rc=0
grep -qx man "$unit_failed" && man_rc=1
grep -qx unit "$unit_failed" && unit_rc=1
grep -qx finished "$unit_failed" || { echo "swift build / swift test did not finish" >&2; unit_rc=1; }
rm -f "$unit_failed" "$unit_log"
# The short soak (docs/RELIABILITY.md): fails on a wrong answer, a proxy crash or too many
# errors; RSS growth is only reported in 2 minutes. SOAK_MINUTES=0 skips it.
soak_rc=0
if [ "${SOAK_MINUTES:-2}" != "0" ]; then
    echo "=== soak (${SOAK_MINUTES:-2} minutes)"
    bash scripts/soak.sh --minutes "${SOAK_MINUTES:-2}" --max-rss-growth 0 || soak_rc=$?
fi
# The benchmark's smoke run (tiny sizes, ~1 minute) keeps scripts/bench working. It
# fails only if the benchmark itself errors, never on its numbers.
echo "=== benchmark smoke run"
bench_rc=0
bench_json="$(mktemp /tmp/bench-smoke-XXXXXX.json)"
bash scripts/bench.sh --smoke --proxy-bin "$DISCOVERY_PROXY_BIN" --json "$bench_json" || bench_rc=$?
rm -f "$bench_json"
if [ "$man_rc" -ne 0 ] || [ "$arch_rc" -ne 0 ] || [ "$format_rc" -ne 0 ] || [ "$deb_rc" -ne 0 ] || [ "$unit_rc" -ne 0 ] || [ "$it_rc" -ne 0 ] || [ "$soak_rc" -ne 0 ] || [ "$bench_rc" -ne 0 ]; then
    echo "FAILED: manual pages exit $man_rc, architecture check exit $arch_rc, formatting exit $format_rc, Debian package exit $deb_rc, swift test exit $unit_rc, integration tests exit $it_rc, soak exit $soak_rc, benchmark smoke exit $bench_rc" >&2
    exit 1
fi
echo "all tests passed"
