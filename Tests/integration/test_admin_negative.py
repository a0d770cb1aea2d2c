"""Administrative records, immediate negatives, domain enumeration, negative
answers after the mDNS wait, and names outside the zones (RFC 8766 §5.6,
§6.1-6.5; RFC 6763 §11; RFC 2308)."""

import time

import dns.flags
import dns.name
import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import ZONE1, ZONE2, ZONES, assert_negative, name, ptr_targets, query, rrset, unique

FAST = 1.0  # "at once": the spec test says < 0.5 s; 1 s keeps it loose but far below 6 s


def to_local(qname, zone):
    return dns.name.Name(qname.relativize(zone).labels + (b"local", b"")).to_text().lower()


def assert_no_mdns_for(lab, t0, qnames, rdtypes):
    """No outgoing mDNS query from dpt-r for any of `qnames` (.local text forms)
    with any of `rdtypes` since t0. The type matters: other tests' browses (a
    `_ipp._tcp` PTR, say) keep running and avahi re-asks them at 1, 2, 4 s..., which
    is not the proxy passing this query on."""
    time.sleep(0.8)  # avahi defers a new query by ~100 ms; leave room for it
    sent = lab.capture.queries(since=t0)
    bad = [(n, T.to_text(t)) for _ts, n, t, _src in sent if n in qnames and t in rdtypes]
    assert not bad, "mDNS queries were sent for: %s" % bad


@pytest.mark.parametrize("zone", ZONES, ids=["lab1", "lab2"])
def test_apex_soa(lab, zone):
    """RFC 8766 §6.1, §6.3: apex SOA answered at once, AA=1, MNAME = server
    name, SERIAL 0, REFRESH 7200, RETRY 3600, EXPIRE 86400, MINIMUM 10, TTL <= 10."""
    r, dt = query(zone, T.SOA)
    assert dt < FAST, "apex SOA took %.2fs" % dt
    assert r.rcode() == dns.rcode.NOERROR
    assert r.flags & dns.flags.AA
    soa = rrset(r, zone, T.SOA)
    assert soa is not None, r
    rd = soa[0]
    assert rd.mname == dns.name.from_text(L.SERVER_NAME)
    assert (rd.serial, rd.refresh, rd.retry, rd.expire, rd.minimum) == (0, 7200, 3600, 86400, 10)
    assert soa.ttl <= 10


@pytest.mark.parametrize("zone", ZONES, ids=["lab1", "lab2"])
def test_apex_ns(lab, zone):
    """RFC 8766 §6.2, §6.3: apex NS answered at once with the proxy's own name
    (the SOA MNAME), which does not lie inside a delegated zone."""
    r, dt = query(zone, T.NS)
    assert dt < FAST
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    ns = rrset(r, zone, T.NS)
    assert ns is not None, r
    targets = {rd.target for rd in ns}
    assert dns.name.from_text(L.SERVER_NAME) in targets
    for t in targets:
        assert not any(t.is_subdomain(z) for z in ZONES), "NS target %s inside a zone" % t


BELOW_APEX = [
    ("sub", T.NS),
    ("_ipp._tcp", T.SOA),
    ("x", T.DS),
    ("Printer One._ipp._tcp", T.NS),
]


@pytest.mark.parametrize("rel,rdtype", BELOW_APEX, ids=[f"{r}-{T.to_text(t)}" for r, t in BELOW_APEX])
def test_below_apex_delegation_records_negative_at_once(lab, rel, rdtype):
    """RFC 8766 §6.3 (MUST): SOA, NS and DS below the apex get an immediate
    negative answer, with no mDNS query."""
    qn = name(*rel.split("."))
    t0 = time.time()
    r, dt = query(qn, rdtype)
    assert dt < FAST, "took %.2fs" % dt
    assert_negative(r)
    assert_no_mdns_for(lab, t0, {to_local(qn, ZONE1)}, {rdtype})


METADATA = ["_dns-update._udp", "_dns-update._tcp", "_dns-update-tls._tcp",
            "_dns-push-tls._tcp", "_dns-llq._udp", "_dns-llq._tcp", "_dns-llq-tls._tcp"]


@pytest.mark.parametrize("rel", METADATA)
def test_metadata_srv_negative_at_once(lab, rel):
    """RFC 8766 §6.4 (MUST): update/LLQ/Push SRV names are answered at once and
    never passed to mDNS (negative, since neither LLQ nor Push is offered)."""
    qn = name(*rel.split("."))
    t0 = time.time()
    r, dt = query(qn, T.SRV)
    assert dt < FAST, "took %.2fs" % dt
    assert_negative(r)
    assert_no_mdns_for(lab, t0, {to_local(qn, ZONE1)}, {T.SRV})


@pytest.mark.parametrize("label", ["b", "db", "lb"])
@pytest.mark.parametrize("zone", ZONES, ids=["lab1", "lab2"])
def test_domain_enumeration_in_zone(lab, label, zone):
    """RFC 8766 §6.5, RFC 6763 §11: `b/db/lb._dns-sd._udp.<zone> PTR` answered
    at once with the browse domains (every link zone); no mDNS."""
    qn = name(label, "_dns-sd", "_udp", zone=zone)
    t0 = time.time()
    r, dt = query(qn, T.PTR)
    assert dt < FAST, "took %.2fs" % dt
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    got = ptr_targets(r, qn)
    if label == "db":
        # the default browse domain: one of the browse domains (RFC 8766 §5.2.1)
        assert got and got <= set(ZONES), got
    else:
        assert got == set(ZONES), got
    assert_no_mdns_for(lab, t0, {to_local(qn, zone)}, {T.PTR})


def _rev4(net_base):
    return dns.name.from_text(".".join(reversed(net_base.split("."))) + ".in-addr.arpa.")


def _rev6_64(prefix_hex16):
    nibbles = list(prefix_hex16) + ["0"] * 16
    return dns.name.from_text(".".join(reversed(nibbles)) + ".ip6.arpa.")


REVERSE = [
    ("v4-link1", _rev4("192.0.2.0"), ZONE1),
    ("v4-link2", _rev4("198.51.100.0"), ZONE2),
    ("v6-link1", _rev6_64("20010db800010000"), ZONE1),
    ("v6-link2", _rev6_64("20010db800020000"), ZONE2),
]


@pytest.mark.parametrize("label", ["b", "db", "lb"])
@pytest.mark.parametrize("case", REVERSE, ids=[c[0] for c in REVERSE])
def test_domain_enumeration_reverse(lab, label, case):
    """RFC 8766 §6.5 / RFC 6763 §11: `b._dns-sd._udp.<reversed subnet base>`
    (in-addr.arpa and ip6.arpa) is answered at once by the proxy with the
    browse domains, including the link's own zone; never via mDNS.
    e.g. b._dns-sd._udp.0.2.0.192.in-addr.arpa. for 192.0.2.0/24."""
    _id, rev, own = case
    qn = dns.name.Name((label.encode(), b"_dns-sd", b"_udp") + rev.labels)
    r, dt = query(qn, T.PTR)
    assert dt < FAST, "took %.2fs" % dt
    assert r.rcode() == dns.rcode.NOERROR, dns.rcode.to_text(r.rcode())
    got = ptr_targets(r, qn)
    assert own in got, "%s not in %s" % (own, got)
    assert got <= set(ZONES), got


def test_db_is_one_of_b(lab):
    """RFC 8766 §5.2.1 (MUST): the default browse domain is one of the browse domains."""
    b, _ = query(name("b", "_dns-sd", "_udp"), T.PTR)
    db, _ = query(name("db", "_dns-sd", "_udp"), T.PTR)
    assert ptr_targets(db, name("db", "_dns-sd", "_udp")) <= ptr_targets(b, name("b", "_dns-sd", "_udp"))


@pytest.mark.parametrize("label", ["r", "dr"])
def test_registration_domains_negative(lab, label):
    """Checklist §1.7 (inference): no updates are possible, so r/dr are answered
    negatively (NOERROR, no data, SOA)."""
    r, _ = query(name(label, "_dns-sd", "_udp"), T.PTR, timeout=12)
    assert_negative(r)


def test_negative_answer_after_mdns_wait(lab):
    """RFC 8766 §5.6: nothing relevant -> NOERROR, ANCOUNT 0, SOA in authority.
    The proxy answers after its negative timeout (0.8 s by default, not the RFC's
    6 s, which outlasts resolvers' patience), with a negative-caching time of 2 s
    (RFC 2308 §5) since mDNS has not had its say; the mDNS query for
    `<name>.local.` goes on after the answer, so a slow responder is in the cache
    for the next query."""
    inst = name(unique(), "_ipp", "_tcp")
    t0 = time.time()
    r, dt = query(inst, T.SRV, timeout=12)
    answered = time.time()
    assert_negative(r)
    soa = [rs for rs in r.authority if rs.rdtype == T.SOA][0]
    assert min(soa.ttl, soa[0].minimum) == 2, "early negative cached for %d s, want 2" % soa[0].minimum
    assert dt < 4.0, "negative answer after %.2fs" % dt
    local = to_local(inst, ZONE1)
    L.wait_for(lambda: any(n == local for ts, n, _t, _src in lab.capture.queries(since=answered + 0.05)),
               5, what="an mDNS query for %s after the answer (the query runs on)" % local)
    assert local in {n for _ts, n, _t, _src in lab.capture.queries(since=t0)}


def test_never_nxdomain_in_zone(lab):
    """RFC 8766 §5.6: a name under the zone with no data is NOERROR, never
    NXDOMAIN (it may be an empty non-terminal)."""
    r, _ = query(name(unique("nohost")), T.A, timeout=12)
    assert_negative(r)


def test_unknown_service_type_browse_negative(lab):
    """RFC 8766 §5.6: browsing a service type nobody offers -> NOERROR/NODATA."""
    r, _ = query(name("_" + unique("t")[:14], "_tcp"), T.PTR, timeout=12)
    assert_negative(r)


@pytest.mark.parametrize("qname,rdtype", [
    ("www.example.org.", T.A),
    ("example.", T.SOA),
    ("printer.local.", T.A),
    ("_dpt-outside._tcp.lab3.example.", T.PTR),  # a type no other test browses
])
def test_outside_zones_refused(lab, qname, rdtype):
    """Checklist §1.8 (practice): names outside every zone get REFUSED with
    RA=0, quickly, and no mDNS traffic."""
    t0 = time.time()
    r, dt = query(qname, rdtype, check=False)
    assert r.rcode() == dns.rcode.REFUSED, dns.rcode.to_text(r.rcode())
    assert not r.flags & dns.flags.RA
    assert not r.answer
    assert dt < FAST
    assert_no_mdns_for(lab, t0, {qname.lower(), qname.lower().replace("lab3.example.", "local.")}, {rdtype})
