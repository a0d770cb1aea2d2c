"""Row h. links (issue 16, "Many links on one proxy"): one proxy serving N links (200 in
the full run) through one avahi-daemon, in the campus lab (Tests/integration/campus_lab.py,
its own namespaces), against a reference proxy serving link 1 alone in the same lab.

Measured: links served (each link's browse answers with its own printer), start-up to all
zones answering SOA, RSS per configured link, cold browse latency and cache-hit qps on the
last link against the first (flat: ratio ~1), isolation (every link's browse, and a sample
of cross-zone resolves, never show another link's instance). The far ends answer IPv4 mDNS
only, so every link needs the router's IPv4 membership: the lab raises
net.ipv4.igmp_max_memberships to N + 16 (the kernel's 20 covers 19 links and lo)."""

from __future__ import annotations

import os
import random
import time
from concurrent.futures import ThreadPoolExecutor

import dns.name
import dns.rdataclass
import dns.rdatatype

import campus_lab as C
import dnsperf
from report import ms

SECTION = "h. links"
MAIN_PORT, REF_PORT = 5310, 5311
LOAD_CLIENTS, LOAD_OUTSTANDING = 2, 50


class Sizes:
    def __init__(self, smoke, links):
        self.links = links or (5 if smoke else 200)
        self.cold_types = 3 if smoke else 15          # fresh types per link measured
        self.load_seconds = 1 if smoke else 5
        self.rounds = 1 if smoke else 3               # interleaved first/last load runs
        self.cross_pairs = 4 if smoke else 20         # cross-zone resolves (isolation)


def _own(ln):
    return dns.name.Name((ln.instance.encode(), b"_ipp", b"_tcp") + dns.name.from_text(ln.zone).labels)


def _browse(lab, ln, port, tries=8):
    """PTR targets of link ln's _ipp._tcp browse, asked until something shows (bounded)."""
    qname = dns.name.from_text("_ipp._tcp." + ln.zone)
    for _ in range(tries):
        r, _s = lab.ask(qname, "PTR", port, timeout=5)
        rs = r.get_rrset(r.answer, qname, dns.rdataclass.IN, dns.rdatatype.PTR) if r else None
        if rs:
            return {rd.target for rd in rs}
        time.sleep(0.5)
    return set()


def _served(lab, port, links):
    """(served, foreign): links whose browse lists exactly their own printer, and any
    (link, name) seen that belongs to another link."""
    with ThreadPoolExecutor(16) as ex:
        got = list(ex.map(lambda ln: _browse(lab, ln, port), links))
    served = sum(1 for ln, g in zip(links, got) if g == {_own(ln)})
    foreign = [(ln.i, t.to_text()) for ln, g in zip(links, got) for t in g if t != _own(ln)]
    return served, foreign


def _cross(lab, port, links, pairs):
    """Zone A asked for link B's instance (SRV): must have no answer."""
    rnd = random.Random(16)
    leaks = []
    for _ in range(pairs):
        a, b = rnd.sample(links, 2)
        qname = dns.name.Name((b.instance.encode(), b"_ipp", b"_tcp") + dns.name.from_text(a.zone).labels)
        r, _s = lab.ask(qname, "SRV", port, timeout=5)
        if r is None or r.answer:
            leaks.append((a.i, b.i, None if r is None else r.answer))
    return leaks


def _cold(lab, port, ln, types):
    """Seconds to the first answer of each fresh type's browse on link ln (None: empty)."""
    out = []
    for t in types:
        r, secs = lab.ask("%s.%s" % (C.cold_type(t), ln.zone), "PTR", port, timeout=5)
        out.append(secs if r is not None and r.answer else None)
    return out


def _load_file(lab, port, ln, path):
    target = "%s.%s" % (ln.host, ln.zone)
    inst = dns.name.Name((ln.instance.encode(), b"_ipp", b"_tcp") + dns.name.from_text(ln.zone).labels)
    qs = [("_ipp._tcp." + ln.zone, "PTR"), (inst, "SRV"), (inst, "TXT"), (target, "A"), (target, "AAAA")]
    for name, rtype in qs:   # warm: every query of the file a cache hit before the load
        for _ in range(8):
            r, _s = lab.ask(name, rtype, port)
            if r is not None and r.answer:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("link %d never answered %s %s" % (ln.i, name, rtype))
    return dnsperf.write_queries(path, [(n, t) for n, t in qs for _ in range(4 if t == "PTR" else 1)])


def _qps(lab, port, path, seconds):
    t = dnsperf.run(port, path, seconds, clients=LOAD_CLIENTS, outstanding=LOAD_OUTSTANDING, ns=C.NS_CR)
    _drain(lab, port)
    return t["qps"], t["lost"]


def _drain(lab, port, limit=120.0):
    """Wait until an apex SOA is answered within 20 ms (the proxy has no backlog)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        r, secs = lab.ask(lab.links[0].zone, "SOA", port, timeout=2)
        if r is not None and secs < 0.02:
            return
        time.sleep(0.2)


def _p50(samples):
    good = [s for s in samples if s is not None]
    return ms(dnsperf.percentile(good, 50)), len(samples) - len(good)


def _measure(lab, name, port, links, sizes, binary, log, type_base):
    """Start one proxy on `links`; its start-up, RSS, cold p50 and qps on first/last link."""
    startup = lab.start_proxy(name=name, port=port, links=links, binary=binary, log_level="notice",
                              timeout=300)
    time.sleep(2.0)   # let start-up allocations settle before reading RSS
    out = dict(startup_s=startup, rss_kib=lab.rss_kib(name))
    log("    %s: %d links, all zones answering SOA after %.2f s, RSS %d KiB" % (
        name, len(links), startup, out["rss_kib"]))
    ends = [links[0]] if len(links) == 1 else [links[0], links[-1]]
    cold = {ln.i: [] for ln in ends}
    for k in range(sizes.cold_types):            # interleaved first/last: same mDNS weather
        for ln in ends:
            cold[ln.i] += _cold(lab, port, ln, [type_base + k])
    out["cold"] = cold
    files = {ln.i: _load_file(lab, port, ln, os.path.join(lab.dir, "%s-link%d.bin" % (name, ln.i))) for ln in ends}
    qps = {ln.i: [] for ln in ends}
    for _ in range(sizes.rounds):
        for ln in ends:
            qps[ln.i].append(_qps(lab, port, files[ln.i], sizes.load_seconds)[0])
    out["qps"] = qps
    log("    %s: cold p50 %s ms, qps %s" % (
        name, {i: _p50(v)[0] for i, v in cold.items()}, {i: [round(q) for q in v] for i, v in qps.items()}))
    return out


def _median(values):
    v = sorted(values)
    return v[len(v) // 2] if v else None


def run(report, binary, log, smoke=False, links=None):
    sizes = Sizes(smoke, links)
    n = sizes.links
    lab = C.CampusLab(n, igmp_max_memberships=n + 16, far_ipv6=False)
    log("h. links: campus lab with %d links" % n)
    t0 = time.monotonic()
    lab.start()
    log("    lab up in %.1f s (veths and addresses %.1f s)" % (time.monotonic() - t0, lab.topology_s))
    try:
        avahi_failures = lab.log_text("avahi-cr", 100000).count("failed")
        ref = _measure(lab, "proxy-1link", REF_PORT, lab.links[:1], sizes, binary, log, 1000)
        lab.stop_proc("proxy-1link")
        main = _measure(lab, "proxy-links", MAIN_PORT, lab.links, sizes, binary, log, 2000)
        t1 = time.monotonic()
        served, foreign = _served(lab, MAIN_PORT, lab.links)
        t_served = time.monotonic() - t1
        leaks = _cross(lab, MAIN_PORT, lab.links, sizes.cross_pairs)
        rss_after = lab.rss_kib("proxy-links")
        avahi_rss = lab.rss_kib("avahi-cr")
        warnings = sum(1 for line in lab.log_text("proxy-links", 100000).splitlines()
                       if " warning " in line or " error " in line or " critical " in line)
        first, last = lab.links[0].i, lab.links[-1].i

        per_link = (main["rss_kib"] - ref["rss_kib"]) * 1024.0 / max(1, n - 1)
        c_first, f_fail = _p50(main["cold"][first])
        c_last, l_fail = _p50(main["cold"][last])
        c_ref, r_fail = _p50(ref["cold"][1])
        q_first, q_last, q_ref = (_median(main["qps"][first]), _median(main["qps"][last]),
                                  _median(ref["qps"][1]))
        ratios = [b / a for a, b in zip(main["qps"][first], main["qps"][last]) if a]
        row = report.row
        row(SECTION, "links served", served, "links", target="%d" % n, ok=served == n,
            note="browse of _ipp._tcp in every zone lists exactly its own printer (%.1f s for all, "
                 "16 at a time); avahi IPv4 memberships raised to %d" % (t_served, n + 16))
        row(SECTION, "start-up to all zones answering SOA", main["startup_s"], "s", target="<= 10 s",
            ok=main["startup_s"] <= 10, note="spawn to the last of %d SOAs; 1-link reference %.2f s"
            % (n, ref["startup_s"]))
        row(SECTION, "proxy RSS, %d links" % n, main["rss_kib"] / 1024.0, "MiB",
            note="idle, 2 s after start-up; 1-link reference %.1f MiB" % (ref["rss_kib"] / 1024.0))
        # Judged from 50 links up: with a few, allocator noise (~0.5 MiB) outweighs the links.
        judged = n >= 50
        row(SECTION, "RSS per configured link", per_link / 1024.0, "KiB", target="<= 64 KiB" if judged else "",
            ok=per_link <= 64 * 1024 if judged else None,
            note="(RSS %d links - RSS 1 link) / %d%s" % (n, n - 1, "" if judged else "; not judged below 50 links"))
        row(SECTION, "cold browse p50, link %d" % first, c_first, "ms",
            note="%d fresh types, %d empty; 1-link reference %.1f ms (%d empty)" % (
                len(main["cold"][first]), f_fail, c_ref or 0, r_fail))
        row(SECTION, "cold browse p50, link %d" % last, c_last, "ms",
            note="%d fresh types, %d empty, interleaved with link %d" % (len(main["cold"][last]), l_fail, first))
        ratio_cold = c_last / c_first if c_first and c_last else None
        row(SECTION, "cold p50 link %d / link %d" % (last, first), ratio_cold, "x",
            target="~1.0 (flat, <= 1.25)", ok=None if ratio_cold is None else ratio_cold <= 1.25)
        row(SECTION, "cache-hit qps, link %d" % first, q_first, "qps",
            note="dnsperf UDP -c %d -q %d, %d s, PTR/SRV/TXT/A/AAAA of the link; median of %d; "
                 "1-link reference %.0f qps" % (LOAD_CLIENTS, LOAD_OUTSTANDING, sizes.load_seconds,
                                                sizes.rounds, q_ref or 0))
        row(SECTION, "cache-hit qps, link %d" % last, q_last, "qps")
        ratio_q = _median(ratios)
        row(SECTION, "qps link %d / link %d" % (last, first), ratio_q, "x", target="~1.0 (flat, >= 0.9)",
            ok=None if ratio_q is None else ratio_q >= 0.9,
            note="median of %d interleaved pairs: %s" % (len(ratios), ", ".join("%.2f" % r for r in ratios)))
        row(SECTION, "isolation: foreign instances seen", len(foreign) + len(leaks), "", target="0",
            ok=not foreign and not leaks,
            note="all %d browses, and %d random cross-zone SRV lookups" % (n, sizes.cross_pairs))
        row(SECTION, "avahi-daemon RSS, %d links" % n, avahi_rss / 1024.0, "MiB",
            note="%d 'failed' lines in its log at start-up; proxy log: %d warnings/errors; "
                 "proxy RSS after the row %.1f MiB" % (avahi_failures, warnings, rss_after / 1024.0))
        report.detail("links", dict(links=n, reference=ref, main=main, served=served, foreign=foreign,
                                    cross_leaks=[(a, b) for a, b, _r in leaks], avahi_rss_kib=avahi_rss,
                                    topology_s=lab.topology_s, proxy_warnings=warnings))
    except BaseException:
        lab.dump_logs([x for x in lab.logs if x.startswith(("proxy", "avahi", "responder"))], tail=40)
        raise
    finally:
        lab.stop()
