"""What recursive resolvers send on the way to a DNS-SD answer, sent to the proxy
directly: the probes of QNAME minimisation (RFC 9156), DNSSEC look-ups, 0x20 mixed
case, EDNS cookies (RFC 7873), and retries from several source ports. Each is
answered correctly and without an mDNS wait. TCP after TC is in
test_edns_truncation.py; test_resolver_path.py goes through the real resolvers."""

import time
from concurrent.futures import ThreadPoolExecutor

import dns.edns
import dns.name
import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import ZONE1, assert_negative, name, query, unique
from test_admin_negative import FAST, assert_no_mdns_for, to_local

PRINTER = name("Printer One", "_ipp", "_tcp")


@pytest.mark.parametrize("labels", [
    ("_tcp",), ("_udp",), ("_dns-sd", "_udp"), ("_ipp", "_tcp"), ("_sub", "_ipp", "_tcp"),
    ("_universal", "_sub", "_ipp", "_tcp"), ("_services", "_dns-sd", "_udp"),
    ("Printer One", "_ipp", "_tcp"),
], ids=lambda labels: ".".join(labels))
def test_minimisation_probe_answered_at_once(lab, labels):
    """RFC 9156 §3 probes (Unbound and PowerDNS ask A, BIND and Knot Resolver NS):
    a type that the name's DNS-SD position cannot hold is NOERROR/NODATA with the
    SOA at once (RFC 8020: an empty non-terminal, never NXDOMAIN), and no mDNS
    query is sent for it."""
    qname = name(*labels)
    t0 = time.time()
    for rdtype in (T.A, T.AAAA, T.NS, T.CNAME):
        r, dt = query(qname, rdtype)
        assert_negative(r)
        assert dt < FAST, "%s %s took %.2fs" % (qname, T.to_text(rdtype), dt)
    assert_no_mdns_for(lab, t0, {to_local(qname, ZONE1)}, {T.A, T.AAAA, T.NS, T.CNAME})


@pytest.mark.parametrize("qname,rdtype", [
    (ZONE1, T.DS), (ZONE1, T.DNSKEY), (name("_ipp", "_tcp"), T.DS), (PRINTER, T.DS),
    (name("farhost1"), T.DS), (ZONE1, T.NSEC3PARAM),
], ids=lambda v: T.to_text(v) if isinstance(v, int) else str(v))
def test_dnssec_lookups_answered_at_once(lab, qname, rdtype):
    """A validating resolver asks DS and DNSKEY to learn that the zone is unsigned:
    NODATA with the SOA at once (RFC 8766 §6.3 for DS below the apex)."""
    r, dt = query(qname, rdtype)
    assert_negative(r)
    assert dt < FAST


def test_mixed_case_question_echoed(lab):
    """0x20 (draft-vixie-dnsext-dns0x20, Unbound's use-caps-for-id): the question
    comes back exactly as asked, answers are owned by the name as asked, and the
    browse is the same as for the lower-case name."""
    lower = name("_ipp", "_tcp")
    query(lower, T.PTR)  # warm
    mixed = dns.name.Name((b"_iPp", b"_TcP", b"LaB1", b"eXaMpLe", b""))
    r, _ = query(mixed, T.PTR)
    assert r.question[0].name.labels == mixed.labels, "question not echoed byte for byte"
    assert r.answer and all(rs.name.labels == mixed.labels for rs in r.answer)
    assert PRINTER in {rd.target for rd in r.answer[0]}


def test_cookie_option_ignored(lab):
    """RFC 7873 §5.2: a server without cookie support answers as if the option
    were absent (BIND sends a client cookie with every query)."""
    cookie = dns.edns.GenericOption(10, bytes(range(8)))
    r, dt = query(L.ZONE1, T.SOA, options=[cookie])
    assert r.rcode() == dns.rcode.NOERROR and r.answer
    r, _ = query(name("_tcp"), T.A, options=[cookie])
    assert_negative(r)


def test_retries_from_other_ports_share_one_browse(lab):
    """Resolvers re-send a query from new source ports (and new IDs) when the first
    gets no quick answer: every copy joins the one mDNS query, and each gets its
    own answer by the negative timeout of the first."""
    qname = name("_" + unique("rt")[:12], "_tcp")
    t0 = time.time()

    def ask(delay):
        time.sleep(delay)
        return query(qname, T.PTR, timeout=5)

    with ThreadPoolExecutor(3) as ex:
        results = [f.result() for f in [ex.submit(ask, d) for d in (0.0, 0.3, 0.6)]]
    for r, _dt in results:
        assert_negative(r)
    local = to_local(qname, ZONE1)
    time.sleep(0.3)
    sent = [ts for ts, n, _t, _src in lab.capture.queries(since=t0) if n == local]
    # avahi sends the first query of a browse on each IP protocol; a second browse
    # would double that within the first second.
    first = [ts for ts in sent if ts < t0 + 0.9]
    assert 1 <= len(first) <= 2, "mDNS queries for %s in the first 0.9 s: %d" % (local, len(first))
