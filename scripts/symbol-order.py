#!/usr/bin/env python3
"""Write the linker's symbol ordering file from a profile of the proxy at work.

The release executable's code is laid out in the order of this file (lld
`--symbol-ordering-file`, Package.swift): the functions the proxy runs come first, packed
together, and the rest after them. The kernel maps a file's pages 64 KiB at a time around
each page a fault touches, so functions scattered over 27 MB of code keep ~11 MiB resident
though about 2 MiB is run; packed, they keep about what they use (docs/BENCHMARKS.md,
"Footprint, step 5"; Linking/README.md).

How: the unstripped static release build runs under valgrind's callgrind in the namespace
lab, twice. First as bench row j measures it (one link, start-up, the first queries a
client sends, an idle while); then a wider run (both transports, every record type, the
admin endpoint). Every function either run executed is listed: the first run's, most
instructions first, then the ones only the wider run needed. Functions of the prebuilt
Swift runtime and C libraries are listed too, where their archives keep a section per
function.

Needs root (the lab), valgrind, and the build it profiles, made as debian/rules makes it:

    swift build -c release --static-swift-stdlib --scratch-path .build-deb \
        $(grep -v '^#' Linking/release-flags) --product discovery-proxy
    sudo python3 scripts/symbol-order.py --binary .build-deb/release/discovery-proxy

Then link again. SwiftPM does not know the link reads this file: delete the executable
(.build-deb/release/discovery-proxy) and build, or it keeps the old layout.

Names that no longer exist after a change are skipped by the linker (no warning); new code
is laid out after the listed code until this is run again. Run it after a change to the
query path, and bench row j before and after.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(REPO, "Tests", "integration"))
sys.path.insert(0, os.path.join(HERE, "bench"))

import dns.rdatatype as T  # noqa: E402

import footprint  # noqa: E402
import lab  # noqa: E402
import probes  # noqa: E402
from proxies import FOOTPRINT_PORT, Proxy  # noqa: E402

DEFAULT_OUT = os.path.join(REPO, "Linking", "symbol-order.txt")
HEADER = """\
# The release executable's layout: the functions the proxy runs, first (lld
# --symbol-ordering-file, Package.swift). Written by scripts/symbol-order.py from a
# callgrind profile in the lab; do not edit by hand. {count} functions, from {binary}.
"""


def callgrind_wrapper(directory, binary, out_file):
    """A script the lab runs as the proxy: the binary under callgrind (instruction counts
    per function, names as the symbol table has them)."""
    path = os.path.join(directory, "proxy-under-callgrind")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s --compress-strings=no "
                "--demangle=no --dump-instr=no --dump-line=no %s \"$@\"\n" % (out_file, binary))
    os.chmod(path, 0o755)
    return path


def self_costs(path, binary):
    """{function: instructions executed in it} for the functions of `binary` in a
    callgrind output file (names as the symbol table has them)."""
    costs, obj, current, skip_next = {}, None, None, False
    binary = os.path.realpath(binary)
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if skip_next:       # a call's inclusive cost: the callee's, not this function's
                skip_next = False
                continue
            if line.startswith("ob="):
                obj = os.path.realpath(line[3:])
            elif line.startswith("fn="):
                name = re.sub(r"'\d+$", "", line[3:])  # callgrind's recursion-level suffix
                current = name if obj == binary and not name.startswith("0x") else None
                if current is not None:
                    costs.setdefault(current, 0)
            elif line.startswith("calls="):
                skip_next = True
            elif current is not None and line[:1].isdigit():
                costs[current] += int(line.split()[-1])
    return costs


def first_queries(port):
    """Row j's first queries. A profile of a proxy that answered none of them would order the
    wrong code."""
    answered = footprint.ask_first_queries(port, timeout=20.0)
    if answered < len(footprint.FIRST_QUERIES):
        raise RuntimeError("the proxy under callgrind answered %d of the %d first queries" % (
            answered, len(footprint.FIRST_QUERIES)))


def wider_queries(port, admin_port):
    """Both transports, every record type a browser follows, a miss, and the admin routes."""
    for tcp in (False, True):
        for _ in range(2):
            first_queries(port)
            r, _t = probes.ask("_ipp._tcp." + lab.ZONE1, T.PTR, port, timeout=20.0, tcp=tcp)
            instances = [rr.target.to_text() for rrset in (r.answer if r else []) for rr in rrset
                         if rrset.rdtype == T.PTR]
            for instance in instances[:2]:
                for rdtype in (T.SRV, T.TXT):
                    probes.ask(instance, rdtype, port, timeout=20.0, tcp=tcp)
            for name, rdtype in [("lb._dns-sd._udp." + lab.ZONE1, T.PTR), ("nothing-here." + lab.ZONE1, T.A),
                                 ("_http._tcp." + lab.ZONE1, T.PTR), (lab.ZONE1, T.NS)]:
                probes.ask(name, rdtype, port, timeout=20.0, tcp=tcp)
    with lab.netns(lab.NS_R):
        for route in ("/metrics", "/healthz", "/api/services", "/"):
            try:
                urllib.request.urlopen("http://%s:%d%s" % (lab.PROXY_ADDR, admin_port, route), timeout=60).read()
            except OSError as e:
                print("symbol-order: admin %s: %s" % (route, e), file=sys.stderr)


def profile(lab_, binary, directory, name, workload, idle):
    out = os.path.join(directory, "%s.callgrind" % name)
    wrapper = callgrind_wrapper(directory, binary, out)
    # Row j's proxy (one link, the bench's configuration), with time to start under
    # callgrind, which runs it ~50 times slower.
    p = Proxy(lab_, wrapper, FOOTPRINT_PORT, name, links=[(lab.R_IF1, lab.ZONE1)]).start(timeout=300)
    try:
        workload(p)
        time.sleep(idle)
    finally:
        lab_.stop_proc(name)
    deadline = time.monotonic() + 60
    while not os.path.exists(out) and time.monotonic() < deadline:
        time.sleep(0.5)
    if not os.path.exists(out):
        raise RuntimeError("callgrind wrote no profile for %s (see the lab's %s log)" % (name, name))
    return self_costs(out, binary)


def hottest_first(costs):
    """The functions that ran, most instructions first (ties by name, so runs compare)."""
    return sorted((f for f, c in costs.items() if c > 0), key=lambda f: (-costs[f], f))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", required=True, help="the unstripped static release build")
    ap.add_argument("--out", default=DEFAULT_OUT)
    ap.add_argument("--idle", type=float, default=20.0, help="seconds idle after the first queries")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        sys.exit("symbol-order: valgrind is needed (apt-get install valgrind)")
    lab_ = lab.Lab()
    lab_.start(with_proxy=False)
    try:
        with tempfile.TemporaryDirectory() as directory:
            os.chmod(directory, 0o755)
            # Valgrind 3.19 (Debian 12) cannot read the toolchain's DWARF 5; the symbol table,
            # all the names this needs, stays. The code is the same, at the same addresses.
            binary = os.path.join(directory, os.path.basename(args.binary))
            subprocess.run(["objcopy", "--strip-debug", args.binary, binary], check=True)
            first = profile(lab_, binary, directory, "order-first", lambda p: first_queries(p.port), args.idle)
            wider = profile(lab_, binary, directory, "order-wider",
                            lambda p: wider_queries(p.port, p.admin_port), 2.0)
    finally:
        lab_.stop()
    order = hottest_first(first)
    listed = set(order)
    order += [f for f in hottest_first(wider) if f not in listed]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(HEADER.format(count=len(order), binary=os.path.basename(binary)))
        f.write("".join(name + "\n" for name in order))
    print("symbol-order: %d functions (%d from the first queries) -> %s" % (
        len(order), len(listed), os.path.relpath(args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
