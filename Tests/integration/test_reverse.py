"""Reverse lookups (RFC 8766 §5.4, §5.5): a query in a link's reverse zone is
sent unchanged as an mDNS query on that link only, and `.local` names in the
returned RDATA are rewritten into the link's zone. avahi-daemon publishes the
reverse PTRs of its own addresses (publish-addresses, on by default), so the
far hosts farhost1 (192.0.2.10, 2001:db8:1::10) and farhost2 (198.51.100.10)
answer them."""

import time

import dns.name
import dns.reversename
import dns.rdatatype as T

import lab as L
from helpers import ZONE1, ZONE2, assert_sane, dig, query, rrset


def _router_linklocal(ifname):
    out = L.nsrun(L.NS_R, ["ip", "-6", "-o", "addr", "show", "dev", ifname, "scope", "link"]).stdout
    return {tok.split("/")[0] for tok in out.split() if tok.startswith("fe80")}


def _senders(lab, since, qname):
    """Source addresses of the router's mDNS queries for qname since `since`."""
    return {src for ts, n, _t, src in lab.capture.queries(since=since) if n == qname.lower()}


def _ptr_until(addr, want, timeout=8.0):
    """Query PTR for addr until `want` is answered (the first reply may race
    avahi's cache), at most `timeout` seconds; return the last response."""
    qname = dns.reversename.from_address(addr)
    deadline = time.monotonic() + timeout
    while True:
        r, _ = query(qname, T.PTR, timeout=12)
        rs = rrset(r, qname, T.PTR)
        if (rs and want in {rd.target for rd in rs}) or time.monotonic() > deadline:
            return qname, r
        time.sleep(0.5)


def test_dig_x_ipv4_rewritten_into_link_zone(lab):
    """RFC 8766 §5.4: `dig -x 192.0.2.10` returns the far host's PTR with
    `farhost1.local.` rewritten to `farhost1.lab1.example.` (§5.5: RDATA
    names of a reverse answer go to the link's zone), authoritative, TTL ≤ 10;
    the mDNS question is the reverse name unchanged, asked on link 1 only."""
    t0 = time.time()
    d = dig("-x", L.L1_V4)
    assert d.status == "NOERROR", d.out
    assert "aa" in d.flags, d.out
    rows = [r for r in d.rows() if r[3] == "PTR"]
    assert rows, "no PTR answer:\n%s" % d.out
    assert rows[0][0] == "10.2.0.192.in-addr.arpa.", d.out
    assert {r[4] for r in rows} == {"%s.%s" % (L.FAR1_HOST, L.ZONE1)}, d.out
    assert all(int(r[1]) <= 10 for r in rows), d.out
    assert ".local." not in d.out, d.out

    time.sleep(0.5)
    qn = "10.2.0.192.in-addr.arpa."
    srcs = _senders(lab, t0 - 0.1, qn)
    assert srcs, "no mDNS query for %s (it must be asked unchanged, §5.4)" % qn
    link2 = {L.R_V4_2, L.R_V6_2} | _router_linklocal(L.R_IF2)
    link1 = {L.R_V4_1, L.R_V6_1} | _router_linklocal(L.R_IF1)
    assert not srcs & link2, "reverse query for a link-1 address went out on link 2: %s" % srcs
    assert srcs <= link1, "unexpected senders %s" % srcs
    assert L.R_V4_1 in srcs, "not asked over IPv4 on link 1: %s" % srcs
    # nothing rewritten to .local went to mDNS under the zone's name either
    assert not [n for _ts, n, _t, _s in lab.capture.queries(since=t0 - 0.1)
                if "in-addr.arpa.local" in n], "reverse name rewritten to .local"


def test_reverse_ipv6_rewritten_into_link_zone(lab):
    """RFC 8766 §5.4 for ip6.arpa: the PTR of 2001:db8:1::10 is
    `farhost1.lab1.example.`."""
    qname, r = _ptr_until(L.L1_V6, dns.name.from_text("%s.%s" % (L.FAR1_HOST, L.ZONE1)))
    assert_sane(r)
    rs = rrset(r, qname, T.PTR)
    assert rs is not None, r
    assert {rd.target for rd in rs} == {dns.name.Name((L.FAR1_HOST.encode(),) + ZONE1.labels)}, r


def test_reverse_link2_into_link2_zone(lab):
    """RFC 8766 §5.1/§5.4: each reverse zone belongs to its own link: the
    PTR of 198.51.100.10 is `farhost2.lab2.example.`, never under lab1."""
    want = dns.name.Name((L.FAR2_HOST.encode(),) + ZONE2.labels)
    qname, r = _ptr_until(L.L2_V4, want)
    rs = rrset(r, qname, T.PTR)
    assert rs is not None and {rd.target for rd in rs} == {want}, r


def test_reverse_of_unknown_address_is_negative(lab):
    """RFC 8766 §5.6: a reverse name nobody answers gets NOERROR/no data
    with the reverse zone's SOA, never NXDOMAIN."""
    qname = dns.reversename.from_address("192.0.2.199")
    r, _ = query(qname, T.PTR, timeout=12)
    assert r.rcode() == 0, r
    assert not r.answer, r
    soa = [rs for rs in r.authority if rs.rdtype == T.SOA]
    assert soa and qname.is_subdomain(soa[0].name), r
