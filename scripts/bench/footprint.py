"""j. footprint (issue 28): what the proxy costs a router (its binary, its package, its
resident memory at idle with one link after the first queries) beside knotd and
avahi-daemon measured in the same run. The memory per 1,000 instances is row d's.

The binary targets are for the static build the .deb ships (`--static-swift-stdlib`): a
dynamic build's file leaves the Swift runtime and Foundation in shared libraries, so its size
is printed as context only."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time

import dns.rdatatype

import lab
import probes
import refservers
from proxies import FOOTPRINT_PORT, Proxy

MB = 1000 * 1000
SECTION = "j. footprint"


def stripped_size(path):
    """Bytes of `path` once stripped of symbols and debug info (a copy is stripped)."""
    with tempfile.TemporaryDirectory() as d:
        copy = os.path.join(d, "binary")
        subprocess.run(["strip", "-o", copy, path], check=True, capture_output=True)
        return os.path.getsize(copy)


def links_swift_runtime(path):
    """True when the binary loads the Swift runtime from a shared library (a dynamic build)."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    return "libswiftCore" in out


# The first queries a client sends: the apex SOA, the browse domains, a service type.
FIRST_QUERIES = [(lab.ZONE1, dns.rdatatype.SOA), ("b._dns-sd._udp." + lab.ZONE1, dns.rdatatype.PTR),
                 ("_services._dns-sd._udp." + lab.ZONE1, dns.rdatatype.PTR),
                 ("_ipp._tcp." + lab.ZONE1, dns.rdatatype.PTR)]


def ask_first_queries(port, timeout=3.0):
    """Asks FIRST_QUERIES; returns how many got an answer with records."""
    answered = 0
    for name, rdtype in FIRST_QUERIES:
        r, _t = probes.ask(name, rdtype, port, timeout=timeout)
        answered += r is not None and bool(r.answer)
    return answered


def run(run_, deb=None):
    report, binary = run_.report, run_.binary
    static = not links_swift_runtime(binary)
    size = stripped_size(binary)
    report.row(SECTION, "discovery-proxy executable, stripped", size / MB, "MB",
               target="<= 25 MB" if static else "", ok=size <= 25 * MB if static else None,
               note="static Swift runtime, as the .deb ships it" if static else
               "context: a dynamic build (Swift runtime in shared libraries); the target is for the static one")
    for name in ("knotd", "avahi-daemon"):
        path = shutil.which(name) or os.path.join("/usr/sbin", name)
        if os.path.exists(path):
            report.row(SECTION, "%s executable, stripped" % name, stripped_size(path) / MB, "MB",
                       note="context: %s, its own shared libraries not counted" % path)
    if deb:
        deb_size = os.path.getsize(deb)
        report.row(SECTION, "Debian package", deb_size / MB, "MB", target="<= 10 MB", ok=deb_size <= 10 * MB,
                   note=os.path.basename(deb))

    p = Proxy(run_.lab, binary, FOOTPRINT_PORT, "proxy-footprint", links=[(lab.R_IF1, lab.ZONE1)]).start()
    try:
        ask_first_queries(p.port)
        time.sleep(2.0)
        idle = probes.rss_kib(p.pid)
    finally:
        p.stop()
    report.row(SECTION, "proxy RSS, idle with one link after the first queries", idle / 1024.0, "MiB",
               target="<= 16 MiB", ok=idle <= 16 * 1024, note="SOA, b._dns-sd._udp, _services, one type asked")

    zone_text = "\n".join([
        "$ORIGIN %s" % lab.ZONE1, "$TTL 10",
        "@ SOA ns.example. hostmaster.example. 1 3600 600 86400 10", "@ NS ns.example.",
        "_ipp._tcp PTR printer._ipp._tcp", "printer._ipp._tcp SRV 0 0 631 printer", "printer._ipp._tcp TXT \"x=y\"",
        "printer A 192.0.2.7", ""])
    port = refservers.start_knot(run_.lab, lab.ZONE1, zone_text, port=refservers.KNOT_PORT + 5)
    try:
        ask_first_queries(port)
        time.sleep(1.0)
        knot = probes.rss_kib(run_.lab.procs["knotd"].pid)
    finally:
        run_.lab.stop_proc("knotd")
    report.row(SECTION, "knotd RSS, idle with one zone after the first queries", knot / 1024.0, "MiB",
               note="context: Knot DNS, 1 UDP + 1 TCP worker (the bench's reference configuration)")
    avahi = run_.lab.procs.get("avahi-r")
    if avahi is not None and avahi.poll() is None:
        report.row(SECTION, "avahi-daemon RSS (the router's)", probes.rss_kib(avahi.pid) / 1024.0, "MiB",
                   note="context: the daemon the proxy browses through, at this point of the run")
    report.detail("footprint", dict(static=static, stripped_bytes=size, idle_rss_kib=idle, knotd_rss_kib=knot,
                                    deb_bytes=os.path.getsize(deb) if deb else None))
