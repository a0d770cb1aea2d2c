"""Client-side helpers for the integration tests: dnspython and dig, both
talking to the proxy inside dpt-r."""

from __future__ import annotations

import re
import select
import socket
import struct
import subprocess
import time
import uuid

import dns.edns
import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype

import lab as L

ZONE1 = dns.name.from_text(L.ZONE1)
ZONE2 = dns.name.from_text(L.ZONE2)
ZONES = (ZONE1, ZONE2)
MAX_TTL = 10


def name(*labels, zone=ZONE1):
    """Build a name from raw labels (str is UTF-8 encoded, never IDNA) under zone."""
    raw = tuple(lb.encode("utf-8") if isinstance(lb, str) else lb for lb in labels)
    return dns.name.Name(raw + zone.labels)


def unique(prefix="nosuch"):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


def make_query(qname, rdtype, *, edns=0, payload=1232, options=None, flags=None):
    if isinstance(qname, str):
        qname = dns.name.from_text(qname)
    q = dns.message.make_query(qname, rdtype, use_edns=edns, payload=payload,
                               options=options)
    q.flags &= ~dns.flags.RD  # +norec
    if flags is not None:
        q.flags = flags
    return q


def query(qname, rdtype, *, tcp=False, v6=False, edns=0, payload=1232, options=None,
          timeout=10.0, check=True, port=L.PROXY_PORT, source=None):
    """Send one query to the proxy; return (response, elapsed seconds).

    edns=-1 sends no OPT.  `source` is the client address to send from (one of
    the router's own).  With check=True the response is run through
    assert_sane()."""
    q = make_query(qname, rdtype, edns=edns, payload=payload, options=options)
    addr = L.PROXY_ADDR6 if v6 else L.PROXY_ADDR
    t0 = time.monotonic()
    with L.netns(L.NS_R):
        if tcp:
            r = dns.query.tcp(q, addr, port=port, timeout=timeout, source=source)
        else:
            r = dns.query.udp(q, addr, port=port, timeout=timeout, source=source,
                              ignore_unexpected=True)
    elapsed = time.monotonic() - t0
    if check:
        assert_sane(r)
    return r, elapsed


def browse_until(qname, want, timeout=5.0, **kw):
    """Repeat a PTR query until every name in `want` is listed (or timeout).

    RFC 8766 §5.6 lets the first answer carry only what the first mDNS
    packets brought (answer at the first result), so a complete set may
    need a repeat once slower responders have answered."""
    deadline = time.monotonic() + timeout
    while True:
        r, dt = query(qname, dns.rdatatype.PTR, **kw)
        got = ptr_targets(r, qname)
        if set(want) <= got or time.monotonic() >= deadline:
            return r, got
        time.sleep(0.5)


def udp_raw(wire: bytes, timeout=3.0, v6=False):
    """Send raw bytes over UDP; return the reply bytes or None on timeout."""
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    with L.netns(L.NS_R):
        s = socket.socket(fam, socket.SOCK_DGRAM)
    try:
        s.settimeout(timeout)
        s.sendto(wire, (L.PROXY_ADDR6 if v6 else L.PROXY_ADDR, L.PROXY_PORT))
        try:
            return s.recvfrom(65535)[0]
        except socket.timeout:
            return None
    finally:
        s.close()


def tcp_connect(timeout=10.0, v6=False):
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    with L.netns(L.NS_R):
        s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect((L.PROXY_ADDR6 if v6 else L.PROXY_ADDR, L.PROXY_PORT))
    return s


def tcp_send(sock, wire: bytes):
    sock.sendall(struct.pack(">H", len(wire)) + wire)


def _recv_exact(sock, n, deadline):
    buf = b""
    while len(buf) < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("timed out")
        sock.settimeout(left)
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by the proxy")
        buf += chunk
    return buf


def tcp_recv(sock, timeout=10.0) -> bytes:
    deadline = time.monotonic() + timeout
    (n,) = struct.unpack(">H", _recv_exact(sock, 2, deadline))
    return _recv_exact(sock, n, deadline)


def wait_closed(sock, timeout):
    """Return seconds until the peer closed the connection (EOF or RST), or None."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while time.monotonic() < deadline:
        r, _w, _x = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            continue
        try:
            data = sock.recv(65535)
        except (ConnectionResetError, OSError):
            return time.monotonic() - t0
        if not data:
            return time.monotonic() - t0
    return None


# ---------------------------------------------------------------------------
# checks
# ---------------------------------------------------------------------------

def is_local(n: dns.name.Name) -> bool:
    return len(n.labels) >= 2 and n.labels[-2].lower() == b"local"


def rdata_names(rd):
    for attr in ("target", "mname", "rname", "next", "exchange"):
        v = getattr(rd, attr, None)
        if isinstance(v, dns.name.Name):
            yield v


def all_rrsets(r):
    return list(r.answer) + list(r.authority) + list(r.additional)


def assert_sane(r):
    """Invariants for every response: class IN everywhere (QU / cache-flush
    bits masked, RFC 6762 §18.12-13), every TTL <= 10 (RFC 8766 §5.5.1), no
    .local name anywhere (RFC 8766 §5.5), at most one OPT (RFC 6891 §6.1.1)."""
    for q in r.question:
        assert not is_local(q.name), "question name rewritten to .local: %s" % q.name
    for rrset in all_rrsets(r):
        assert rrset.rdclass == dns.rdataclass.IN, "class %s in %s" % (
            dns.rdataclass.to_text(rrset.rdclass), rrset)
        assert rrset.ttl <= MAX_TTL, "TTL %d > %d in %s" % (rrset.ttl, MAX_TTL, rrset)
        assert not is_local(rrset.name), ".local owner in response: %s" % rrset
        for rd in rrset:
            for n in rdata_names(rd):
                assert not is_local(n), ".local name in RDATA: %s" % rrset


def rrset(r, qname, rdtype, section="answer"):
    if isinstance(qname, str):
        qname = dns.name.from_text(qname)
    for rs in getattr(r, section):
        if rs.name == qname and rs.rdtype == rdtype:
            return rs
    return None


def ptr_targets(r, qname):
    rs = rrset(r, qname, dns.rdatatype.PTR)
    return {rd.target for rd in rs} if rs else set()


def assert_negative(r, zone=ZONE1):
    """NOERROR/NODATA with the zone SOA in authority (RFC 2308 §2.2, §3;
    RFC 8766 §5.6: never NXDOMAIN inside the zone; §6.1: MINIMUM 10, or 2 for a
    negative given before mDNS has run its 6 s, which the proxy caches briefly)."""
    assert r.rcode() == dns.rcode.NOERROR, "rcode %s, want NOERROR" % dns.rcode.to_text(r.rcode())
    assert not r.answer, "unexpected answers: %s" % r.answer
    soa = [rs for rs in r.authority if rs.rdtype == dns.rdatatype.SOA]
    assert soa, "negative answer without SOA in authority: %s" % r
    assert soa[0].name == zone, "SOA owner %s, want %s" % (soa[0].name, zone)
    assert soa[0].ttl <= MAX_TTL
    assert soa[0][0].minimum in (2, 10), "SOA MINIMUM %d" % soa[0][0].minimum
    assert r.flags & dns.flags.AA, "negative answer inside the zone without AA"


# ---------------------------------------------------------------------------
# dig
# ---------------------------------------------------------------------------

DIG_BASE = ["dig", "@%s" % L.PROXY_ADDR, "-p", str(L.PROXY_PORT), "+norec", "+time=10",
            "+tries=1"]


class DigResult:
    def __init__(self, out):
        self.out = out
        m = re.search(r"status: (\w+)", out)
        self.status = m.group(1) if m else None
        m = re.search(r";; flags: ([^;]*);", out)
        self.flags = set(m.group(1).split()) if m else set()
        self.sections = {}
        cur = None
        for line in out.splitlines():
            m = re.match(r";; (\w+) SECTION:", line)
            if m:
                cur = m.group(1)
                self.sections[cur] = []
                continue
            if not line.strip() or line.startswith(";"):
                if not line.strip():
                    cur = None if cur != "OPT" else cur
                continue
            if cur and cur != "QUESTION":
                self.sections[cur].append(line.split(None, 4))
        m = re.search(r"EDNS: version: (\d+)", out)
        self.edns_version = int(m.group(1)) if m else None
        m = re.search(r"MSG SIZE\s+rcvd: (\d+)", out)
        self.size = int(m.group(1)) if m else None

    def rows(self, section="ANSWER"):
        """[owner, ttl, class, type, rdata] rows of a section."""
        return self.sections.get(section, [])


def dig(*args, timeout=30):
    cmd = ["ip", "netns", "exec", L.NS_R] + DIG_BASE + [str(a) for a in args]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return DigResult(r.stdout)
