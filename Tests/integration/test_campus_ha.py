"""Several proxies per link, and many routers under one parent zone (issue 16, RFC 8766 §6.2).

campus_ha_lab.py: routers 1 and 2 both on a shared link and each on a link of its own, ONE
proxy per router (ha1 = ns1.example.: shared.example. and r1.example.; ha2 = ns2.example.:
shared.example. and r2.example.), the own link's delegation narrowed with the per-link
`links[].name-servers`; knotd serves a parent zone made of the two proxies'
`--print-parent-zone` output; a client asks one recursive resolver at a time (resolver_lab's
five). Checks:

* both proxies of the shared zone answer its SOA identically and its apex NS with both;
* the parent zone is the proxies' printed records, and each router's own link (forward and
  reverse zone) is delegated to its router's proxy only, in the printed parent zone and in
  the proxies' own SOA and apex NS, while the shared link's zones list both;
* both proxies of the shared zones answer b/lb domain enumeration there alike: the zones
  both of them serve (each also serves a link of its own, listed only in its own zones);
* through each resolver, the shared zone browses, then keeps answering (a repeat, fresh names,
  a type not asked before) when the proxy the resolver used last stops (SIGTERM: ICMP port
  unreachable) or its router goes silent (nft drop); the client-visible gap is measured and
  printed, and only "answered within a stub's two 5 s tries" is asserted;
* through each resolver, b/lb._dns-sd._udp.example. list both routers' zones and each zone
  browses its own link.

The gap table: `pytest -s` prints it; DPT_CAMPUS_OUT=FILE also writes it there (markdown).
"""

import os
import time
import uuid

import dns.name
import dns.rcode
import dns.rdatatype as T
import pytest

import campus_ha_lab as C
import lab as L
import resolver_lab as RL

STUB_TIMEOUT, STUB_TRIES = 5.0, 2   # glibc's stub: timeout:5 attempts:2
WARM_UP = 6                         # fresh names asked with both proxies up
MAX_FRESH = 15                      # fresh names asked at most after the failure
HA = C.HA
MODES = ("sigterm", "silent")
RESULTS = []                        # one dict per (resolver, mode)


@pytest.fixture(scope="module")
def campus():
    lab = C.CampusLab().start()
    try:
        yield lab
    finally:
        _report()
        lab.stop()


def _n(text):
    return dns.name.from_text(text)


def _fresh():
    """A name nobody asked before whose answer the proxy knows at once: A at a service-type
    name is NODATA without mDNS (README, the QNAME-minimisation rule), so the time measured
    is the resolver's path to a proxy, not an mDNS wait."""
    return "_g%s._tcp.%s" % (uuid.uuid4().hex[:10], C.ZONE_S)


def stub(campus, qname, rdtype):
    """Ask as a stub does (CampusLab.stub). Returns (response or None, first try's latency,
    its outcome, seconds until answered or None, seconds spent)."""
    r, tries = campus.stub(qname, rdtype, STUB_TIMEOUT, STUB_TRIES)
    spent = sum(t for _o, t in tries)
    ok = r is not None and r.rcode() == dns.rcode.NOERROR
    return (r if ok else None), tries[0][1], tries[0][0], spent if ok else None, spent


def _context(campus, note):
    return "%s\n%s" % (note, campus.logs(["resolver-" + str(campus.kind), "ha1", "ha2"]))


def browse(campus, qname):
    """The PTR targets' first labels (instance names) at qname, through the resolver, in lower
    case (DNS compares names so; Knot Resolver 5 lowercases PTR targets, test_resolver_path)."""
    r, _lat, _out, answered, _spent = stub(campus, qname, T.PTR)
    assert r is not None and answered is not None, _context(campus, "%s PTR: no answer" % qname)
    return {rd.target.labels[0].decode("utf-8", "replace").lower() for rs in r.answer if rs.rdtype == T.PTR
            for rd in rs}


def _installed(kind):
    if not RL.installed(kind):
        pytest.skip("%s is not installed" % RL.BINARIES[kind])


# ---------------------------------------------------------------------------------------------

def test_ha_pair_agrees(campus):
    """RFC 8766 §6.2: every proxy of a zone answers the same SOA (serial and values) and an
    apex NS naming all of them, so a resolver sees one zone whichever it asks; the same
    for the shared link's reverse zone."""
    for zone in (C.ZONE_S, C.REV_S):
        soa, ns = [], []
        for name in C.HA:
            v4 = C.proxy(name)[3]
            r = campus.ask_server(v4, zone, T.SOA)
            assert r.rcode() == dns.rcode.NOERROR and r.answer, "%s %s SOA:\n%s" % (name, zone, r)
            soa.append(r.answer[0][0])
            r = campus.ask_server(v4, zone, T.NS)
            ns.append({rd.target for rs in r.answer for rd in rs})
        assert soa[0] == soa[1] and soa[0].serial == soa[1].serial, "%s SOA differs: %s / %s" % (zone, *soa)
        assert ns[0] == ns[1] == {_n(s) for s in C.HA_SERVERS}, "%s NS: %s" % (zone, ns)


def _printed_ns(text_or_lines, zone):
    """The NS targets of `zone` in printed parent-zone text (or record lines)."""
    lines = text_or_lines.splitlines() if isinstance(text_or_lines, str) else text_or_lines
    out = set()
    for line in lines:
        f = line.split(";")[0].split()
        if len(f) == 5 and f[0].lower() == zone and f[3] == "NS":
            out.add(f[4].lower())
    return out


# zone -> the proxies it is delegated to: the shared link's to both, each own link's (forward
# and reverse) to its router's only
DELEGATED = {C.ZONE_S: ("ha1", "ha2"), C.REV_S: ("ha1", "ha2"),
             C.ZONE_A: ("ha1",), C.REV_A: ("ha1",),
             C.ZONE_B: ("ha2",), C.REV_B: ("ha2",)}


def _server(name):
    return C.proxy(name)[2]


def test_parent_zone_from_the_proxies(campus):
    """The parent zone knotd serves is the two proxies' printed records: each name server
    with its own glue, the shared zone delegated to both, each own link to its router's
    proxy, and every link zone listed for browsing."""
    ex, rev = campus.records["example."], campus.records["in-addr.arpa."]
    for name in C.HA:
        _n, _ns, server, v4, v6, _a, _own = C.proxy(name)
        assert "%s\t3600\tIN\tA\t%s" % (server, v4) in ex, ex
        assert "%s\t3600\tIN\tAAAA\t%s" % (server, v6) in ex, ex
    for zone, names in DELEGATED.items():
        lines = rev if zone.endswith(".in-addr.arpa.") else ex
        assert _printed_ns(lines, zone) == {_server(n) for n in names}, (zone, lines)
    for label in ("b", "lb"):
        ptrs = {l.split()[4].lower() for l in ex if l.lower().startswith("%s._dns-sd._udp.example." % label)
                and l.split()[3] == "PTR"}
        assert ptrs >= {C.ZONE_S, C.ZONE_A, C.ZONE_B}, (label, ex)


def test_own_link_delegated_to_its_router_only(campus):
    """One proxy per router, serving the shared link (HA with the other router) and a link of
    its own (`links[].name-servers: [itself]`): link A's zones (r1.example. and
    100.51.198.in-addr.arpa.) are delegated to ns1.example. only and link B's to
    ns2.example. only (the fellow proxy is not on that link: naming it would be a lame
    delegation), while the shared link's zones list both (RFC 8766 §6.2). Checked in each
    proxy's --print-parent-zone output and in its own SOA MNAME and apex NS; the other
    router's proxy refuses the zone of a link it is not on."""
    for name in C.HA:
        own = C.proxy(name)[6]
        printed = campus.printed[name]
        for zone, names in DELEGATED.items():
            if name not in names:
                assert not _printed_ns(printed, zone), "%s prints %s:\n%s" % (name, zone, printed)
                continue
            want = {_server(n) for n in names}
            assert _printed_ns(printed, zone) == {s.lower() for s in want}, \
                "%s prints %s NS %s, wanted %s:\n%s" % (name, zone, _printed_ns(printed, zone), want, printed)
            v4 = C.proxy(name)[3]
            r = campus.ask_server(v4, zone, T.NS)
            got = {rd.target for rs in r.answer if rs.rdtype == T.NS for rd in rs}
            assert r.rcode() == dns.rcode.NOERROR and got == {_n(s) for s in want}, \
                "%s %s NS:\n%s" % (name, zone, r)
            r = campus.ask_server(v4, zone, T.SOA)
            assert r.rcode() == dns.rcode.NOERROR and r.answer, "%s %s SOA:\n%s" % (name, zone, r)
            mname = r.answer[0][0].mname
            assert mname in {_n(s) for s in want}, "%s %s SOA MNAME %s" % (name, zone, mname)
            if zone in (own, C.REV_A if own == C.ZONE_A else C.REV_B):
                assert mname == _n(_server(name)), "%s %s SOA MNAME %s" % (name, zone, mname)
        other = C.ZONE_B if own == C.ZONE_A else C.ZONE_A
        r = campus.ask_server(C.proxy(name)[3], other, T.SOA)
        assert r.rcode() == dns.rcode.REFUSED, "%s answers %s:\n%s" % (name, other, r)


def test_ha_pair_agrees_on_browse_domains(campus):
    """RFC 8766 §6.2: the proxies of a zone give the same answers, so the browse domains a
    client on the shared link is offered (b/lb under shared.example. and under its subnet's
    reverse zone) do not depend on which of the two proxies its resolver asked."""
    for qname in ("b._dns-sd._udp." + C.ZONE_S, "lb._dns-sd._udp." + C.ZONE_S,
                  "b._dns-sd._udp.0." + C.REV_S, "lb._dns-sd._udp.0." + C.REV_S):
        got = []
        for name in C.HA:
            r = campus.ask_server(C.proxy(name)[3], qname, T.PTR)
            got.append({rd.target.to_text().lower() for rs in r.answer if rs.rdtype == T.PTR for rd in rs})
        assert got[0] == got[1], "%s PTR: ha1 %s, ha2 %s" % (qname, sorted(got[0]), sorted(got[1]))
        # only the zones both proxies serve (Catalog.browseDomains(askedIn:))
        assert got[0] == {C.ZONE_S}, "%s PTR: %s" % (qname, sorted(got[0]))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", RL.RESOLVERS)
def test_failover(campus, kind, mode):
    """Through `kind`, the shared zone browses with both proxies up; after one fails (`mode`;
    the one the resolver asked last, the worst case), fresh names, a repeat of the browse and
    a browse of a type not asked before all answer through the other within a stub's two
    tries. Fresh names are asked until the resolver has tried the failed proxy (seen on the
    wire) and once more, at most MAX_FRESH: the gap is the latency of the query during
    which it met the failed proxy."""
    _installed(kind)
    campus.start_resolver(kind)
    try:
        assert "shared printer" in browse(campus, "_ipp._tcp." + C.ZONE_S)
        warm = time.time()
        for _ in range(WARM_UP):  # the resolver meets both proxies before the failure
            stub(campus, _fresh(), T.A)
        used = campus.sent_to(HA, warm)
        # the worst case: the proxy the resolver asked last fails
        dead = used[-1][1] if used else "ha1"
        campus.break_proxy(dead, mode)
        t_break = time.time()
        rows, met = [], None
        while len(rows) < MAX_FRESH:
            w0 = time.time()
            rows.append(stub(campus, _fresh(), T.A) + (w0,))
            sent = campus.sent_to([dead], t_break)
            if met is None and sent:
                met = next((i for i, r in enumerate(rows) if sent[0][0] <= r[5] + r[4] + 0.05), len(rows) - 1)
            if met is not None and len(rows) > met + 1:
                break
        dead_tries = len(campus.sent_to([dead], t_break))
        repeat = browse(campus, "_ipp._tcp." + C.ZONE_S)
        fresh_type = browse(campus, "_http._tcp." + C.ZONE_S)
        RESULTS.append(dict(kind=kind, mode=mode, dead=dead,
                            in_use=tuple(sum(1 for _t, n in used if n == h) for h in HA),
                            asked=len(rows), dead_tries=dead_tries,
                            met=None if met is None else (met + 1, rows[met][4], rows[met][2]),
                            worst=max(r[4] for r in rows),
                            failed_tries=sum(1 for r in rows if r[2] != "NOERROR")))
        unanswered = [i for i, r in enumerate(rows) if r[3] is None]
        assert not unanswered, _context(campus, "%s/%s: fresh queries %s unanswered after two "
                                        "tries: %s" % (kind, mode, unanswered, rows))
        assert "shared printer" in repeat and "shared web" in fresh_type, (repeat, fresh_type)
    finally:
        campus.stop_resolver()
        campus.heal()


@pytest.mark.parametrize("kind", RL.RESOLVERS)
def test_two_routers_browse_both(campus, kind):
    """RFC 6763 §11 through one parent zone: b and lb list the zones of both routers (the
    shared one and each router's own), each own zone browses its link's printer and not
    the other's (the resolver reaching it through the one proxy it is delegated to), and the
    address-based form reaches each router's reverse zone (RFC 8766 §5.2.1)."""
    _installed(kind)
    campus.start_resolver(kind)
    try:
        for label in ("b", "lb"):
            zones = browse(campus, "%s._dns-sd._udp.example." % label)
            assert zones >= {"shared", "r1", "r2"}, zones
        assert browse(campus, "_ipp._tcp." + C.ZONE_A) >= {"printer a"}
        assert "printer b" not in browse(campus, "_ipp._tcp." + C.ZONE_A)
        assert browse(campus, "_ipp._tcp." + C.ZONE_B) >= {"printer b"}
        assert "printer a" not in browse(campus, "_ipp._tcp." + C.ZONE_B)
        assert "shared printer" in browse(campus, "_ipp._tcp." + C.ZONE_S)
        # answered by the subnet's router's proxy only (it lists its link zones; the other
        # router's own zone would mean the delegation reached the wrong proxy)
        zones = browse(campus, "b._dns-sd._udp.0.100.51.198.in-addr.arpa.")
        assert "r1" in zones and "r2" not in zones, zones
        zones = browse(campus, "b._dns-sd._udp.128.113.0.203.in-addr.arpa.")  # a /25
        assert "r2" in zones and "r1" not in zones, zones
    finally:
        campus.stop_resolver()


def _report():
    if not RESULTS:
        return
    lines = ["| resolver | failure | before: queries to ha1/ha2 | after: queries to the failed one | "
             "query that met it: n-th, latency | worst | failed stub tries |",
             "|---|---|---|---|---|---|---|"]
    for r in RESULTS:
        met = "not met in %d" % r["asked"] if r["met"] is None else "%d-th, %.2f s (%s)" % r["met"]
        lines.append("| %s | %s | %d/%d | %d | %s | %.2f s | %d |" % (
            r["kind"], "%s %s" % (r["dead"], "stopped (SIGTERM)" if r["mode"] == "sigterm" else "silent (nft drop)"),
            r["in_use"][0], r["in_use"][1], r["dead_tries"], met, r["worst"], r["failed_tries"]))
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    out = os.environ.get("DPT_CAMPUS_OUT")
    if out:
        with open(out, "a") as f:
            f.write(text)
