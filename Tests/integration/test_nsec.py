"""NSEC and NSEC3 queries (RFC 8766 §5.5.3, §7) against real responders on link 1.

avahi refuses ANY as a record browser's type (AVAHI_ERR_IS_PATTERN), so instead of one mDNS
ANY query the proxy asks each type the name can hold in DNS-SD's structure, through the
browses every query shares, and synthesizes one NSEC for that single name. mDNS NSEC records
(python-zeroconf sends one for a host without IPv6) are never passed on."""

import json
import time

import dns.name
import dns.rdatatype as T
import pytest

import lab as L
from helpers import name, query


def _nsec(r, qname, section="answer"):
    rrsets = [s for s in getattr(r, section) if s.rdtype == T.NSEC]
    assert len(rrsets) == 1 and len(rrsets[0]) == 1, r
    rrset = rrsets[0]
    assert rrset.name == qname, "the NSEC is for the queried name alone"
    rd = rrset[0]
    assert rd.next == dns.name.Name([b"\x00"] + list(qname.labels)), "next is the owner's immediate successor"
    types = set()
    for window, bitmap in rd.windows:
        for i, byte in enumerate(bitmap):
            for bit in range(8):
                if byte & (0x80 >> bit):
                    types.add(window * 256 + i * 8 + bit)
    return types


def _until(qname, rdtype, want, timeout=10.0):
    """Asks until the NSEC's bitmap is `want` (mDNS may need a moment the first time)."""
    deadline = time.monotonic() + timeout
    while True:
        r, _ = query(qname, rdtype)
        types = _nsec(r, qname) if rdtype == T.NSEC else _nsec(r, qname, "authority")
        if types == want or time.monotonic() > deadline:
            return r, types
        time.sleep(0.5)


@pytest.fixture
def probe(lab):
    """An instance no other test has asked about, so its SRV and TXT are not cached yet."""
    svc = {"name": "NSEC Probe", "type": "_ipp._tcp", "port": 631, "txt": ["rp=probe"], "host": L.ZC_HOST}
    key = lab.responder_cmd("publish " + json.dumps(svc)).split(" ", 2)[2].strip()
    yield name("NSEC Probe", "_ipp", "_tcp")
    lab.responder_cmd("unpublish " + key)


def test_instance_nsec_is_synthesized_from_srv_and_txt(lab, probe):
    """One NSEC for the instance: SRV, TXT and the NSEC bit (mDNS NSECs lack it). What mDNS
    saw asked for the name was SRV and TXT (avahi may answer from its cache, filled by the
    announcement, without asking), never ANY or NSEC."""
    start = time.time()
    r, types = _until(probe, T.NSEC, {T.SRV, T.TXT, T.NSEC})
    assert r.rcode() == 0 and r.flags & 0x0400, "authoritative NOERROR"
    assert types == {T.SRV, T.TXT, T.NSEC}
    assert all(rrset.ttl <= 10 for rrset in r.answer)
    time.sleep(1.0)
    queries = lab.capture.queries(since=start - 0.5)
    asked = {qt for _ts, qn, qt, _src in queries if qn == "nsec\\032probe._ipp._tcp.local."}
    assert asked <= {T.SRV, T.TXT}, (asked, queries)
    assert not [q for q in queries if q[2] in (T.ANY, T.NSEC)]


def test_host_nsec_and_nsec3(lab):
    """A host with both families: A and AAAA. An NSEC3 query gets NODATA with the SOA and the
    same NSEC in the authority section (the zones are unsigned: nothing to hash with)."""
    qname = name(L.ZC_HOST)
    _r, types = _until(qname, T.NSEC, {T.A, T.AAAA, T.NSEC})
    assert types == {T.A, T.AAAA, T.NSEC}
    r, types = _until(qname, T.NSEC3, {T.A, T.AAAA, T.NSEC})
    assert r.rcode() == 0 and not r.answer
    assert [s.rdtype for s in r.authority] == [T.SOA, T.NSEC]
    assert types == {T.A, T.AAAA, T.NSEC}


def test_apex_and_empty_names_at_once(lab):
    """Names answered from configuration need no mDNS: the apex holds NS and SOA, `_tcp` is an
    empty non-terminal."""
    zone = dns.name.from_text(L.ZONE1)
    start = time.monotonic()
    r, _ = query(zone, T.NSEC)
    assert _nsec(r, zone) == {T.NS, T.SOA, T.NSEC}
    tcp = name("_tcp")
    r, _ = query(tcp, T.NSEC)
    assert _nsec(r, tcp) == {T.NSEC}
    assert time.monotonic() - start < 0.5


@pytest.fixture
def v4only(lab):
    svc = {"name": "V4 Only", "type": "_ipp._tcp", "port": 631, "txt": ["rp=v4"], "host": L.V4_HOST}
    key = lab.responder_cmd("publish " + json.dumps(svc)).split(" ", 2)[2].strip()
    yield
    lab.responder_cmd("unpublish " + key)


def test_ipv4_only_host_no_raw_mdns_nsec(lab, v4only):
    """AAAA of an IPv4-only host is NODATA (SOA only) and carries no mDNS NSEC, though the
    responder sent one on the link (python-zeroconf answers the AAAA question with an NSEC);
    the host's synthesized NSEC lists A, not AAAA."""
    qname = name(L.V4_HOST)
    start = time.time()
    r, types = _until(qname, T.NSEC, {T.A, T.NSEC})
    assert types == {T.A, T.NSEC}
    r, _ = query(qname, T.AAAA)
    assert r.rcode() == 0 and not r.answer
    assert [s.rdtype for s in r.authority] == [T.SOA]
    assert not [s for s in r.additional if s.rdtype == T.NSEC]
    time.sleep(0.5)
    # Found in the capture's bytes: dnspython cannot parse python-zeroconf 0.47's NSEC ("bad
    # NSEC octets"), whose bitmap moreover lists the types the host lacks (AAAA), the reverse
    # of RFC 6762 §6.1. One more reason never to pass mDNS NSECs on.
    with open(lab.capture.path, "rb") as f:
        capture = f.read()
    owner = b"".join(bytes([len(label)]) + label.encode() for label in (L.V4_HOST, "local")) + b"\x00"
    assert owner + b"\x00\x2f" in capture, "the responder's mDNS NSEC (what the proxy must not pass on)"
