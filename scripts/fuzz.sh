#!/usr/bin/env bash
# Builds the libFuzzer harnesses with AddressSanitizer and runs one of them.
#
#   scripts/fuzz.sh [TARGET] [RUNS] [extra libFuzzer flags...]
#
# TARGET: decode (DNSWire.Message(wire:) + encode(limit:), default), query
# (DiscoveryProxy.handle over a scripted mDNS backend), tcp (the DNS-over-TCP pipeline:
# NIOExtras length framing + TCPDNSHandler on an EmbeddedChannel, input cut into chunks) or dso
# (a PushSession on a DiscoveryProxy: scripted DSO messages, mDNS events, clock steps, reloads;
# FUZZ_DSO_SKIP=acl,revoke,unsubscribe turns those checks off) or srp (SRP updates: Message,
# SIG0.find, SRPUpdate.read). RUNS: executions (default 1000000;
# 0 or -1 = until stopped). Seeds: Tests/Fuzz/corpus/TARGET (read-only; new inputs go to
# .build-fuzz/corpus/TARGET). Crashes are written to .build-fuzz/crashes/TARGET/.
# FUZZ_OPTIMIZE=1 adds -O to the Swift flags (DEBUG, @testable and the sanitizers stay; dso runs
# 2-3 times as many executions per second; switching it on or off recompiles every Swift module).
# FUZZ_ASAN=0 leaves AddressSanitizer out (scratch .build-fuzz-noasan): Swift's own checks
# (bounds, overflow, exclusivity) and the harness's invariants stay; dso runs about 3 times faster
# (about 730 against 250 executions/s per worker on this 2-core machine).
# Not run by CI: CI runs only the unit tests (scripts/test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

target="${1:-decode}"
runs="${2:-1000000}"
shift $(( $# > 2 ? 2 : $# ))
case "$target" in decode|query|tcp|dso|srp) ;; *) echo "usage: $0 [decode|query|tcp|dso|srp] [RUNS] [libFuzzer flags]" >&2; exit 2;; esac

scratch=.build-fuzz
sanitizers=fuzzer,address
if [ "${FUZZ_ASAN:-1}" = 0 ]; then scratch=.build-fuzz-noasan; sanitizers=fuzzer; fi
mkdir -p "$scratch"
flags=(-Xswiftc -sanitize=$sanitizers -Xswiftc -DFUZZING)
[ "${FUZZ_OPTIMIZE:-0}" = 1 ] && flags+=(-Xswiftc -O)
echo "building fuzz-dns with ${flags[*]} (log: $scratch/build.log)" >&2
if ! swift build --scratch-path "$scratch" --product fuzz-dns "${flags[@]}" >"$scratch/build.log" 2>&1; then
    grep -v 'Cannot export local symbol' "$scratch/build.log" | tail -30 >&2
    exit 1
fi
binary="$(swift build --scratch-path "$scratch" --product fuzz-dns --show-bin-path "${flags[@]}")/fuzz-dns"

seeds="Tests/Fuzz/corpus/$target"
# TCP streams: 2048 octets hold dozens of frames; longer inputs only slow the harness down.
# DSO scripts: 1024 octets hold a few hundred operations on one proxy.
max_len=4096
[ "$target" = tcp ] && max_len=2048
[ "$target" = dso ] && max_len=1024
work=".build-fuzz/corpus/$target"  # shared by both builds
artifacts=".build-fuzz/crashes/$target/"  # not artifacts/: SwiftPM empties that folder on every build
mkdir -p "$work" "$artifacts"

# ASan: leaks of process-lifetime caches are not bugs here; everything else aborts.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}"
export FUZZ_TARGET="$target" SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"
log="$scratch/fuzz-$target.log"
set +e
"$binary" -runs="$runs" -max_len="$max_len" -print_final_stats=1 -artifact_prefix="$artifacts" \
    "$@" "$work" "$seeds" 2>&1 | tee "$log" | grep -E '^(#[0-9]+ +(INITED|DONE|pulse)|==|SUMMARY|Done|stat::number_of_executed_units|artifact_prefix|Test unit written)'
status=${PIPESTATUS[0]}
set -e
executed="$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | tail -1 | awk '{print $2}')"
echo "fuzz-$target: ${executed:-?} executions, exit status $status, corpus $(ls "$work" | wc -l) + $(ls "$seeds" | wc -l) seeds"
exit "$status"
