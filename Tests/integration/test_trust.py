"""Trust boundaries on every transport: the client ACL (`allow-clients`, RFC 8766 §9.2) and
per-link views (`links[].clients`) for plain DNS over UDP and TCP and for DNS Push
(RFC 8765) over DSO (RFC 8490), in cleartext on the TCP listener (`push.on-tcp`) and over TLS.

The clients run in a client namespace of their own, joined to the router by a veth, each
from its own documentation address (RFC 5737)::

    NS_T = dpt-[<id>-]tc                             dpt-r
    [dptc-r 203.0.113.10  allowed, sees both links]  [dpr-tc 203.0.113.1/24            ]
    [       203.0.113.11  allowed, sees both links]--[ proxy "trust": DNS 203.0.113.1:5320 ]
    [       203.0.113.20  allowed, link 1 hidden   ]  [ (and 127.0.0.1:5320), Push TLS     ]
    [       203.0.113.130 outside allow-clients    ]  [ 203.0.113.1:8863, admin :8320     ]

    allow-clients: [203.0.113.0/27, 127.0.0.0/8]
    links: dpr-l1 lab1.example. clients [203.0.113.0/28, 127.0.0.0/8];  dpr-l2 lab2.example.

Each transport has a service type of its own, published on link 1 (avahi-l1) by the module
and asked for by nobody else (`_trust<t><hex>._tcp`, instance "Secret <T> <hex>"), so an
mDNS query for it in the router's capture (lab.MdnsCapture, every interface of dpt-r) can
only come from a request of this test. Per transport:

* the client outside allow-clients and the client link 1 is hidden from get REFUSED where a
  response is due (DSO: with a Retry Delay), no instance, host or zone of link 1 in any
  byte they read, and no mDNS query for what they asked within 2 s; the counters move
  exactly (dns_acl_refused_total, dns_link_refused_total{link}, dns_refused_queries_total);
* the refused DSO client holds no session (dns_push_sessions does not count it): one
  REFUSED response carrying only a Retry Delay of 300 s, nothing read afterwards, the
  connection ended 5 s later; a unidirectional first message ends it at once (cleartext:
  a TCP reset; over TLS a close_notify, then the TCP reset at once:
  test_tls_abort_is_a_tcp_reset);
* the hidden DSO client keeps its session for link 2 (browse-domain enumeration lists
  link 2 alone); its RECONFIRMs about link 1 are ignored (no removal PUSH to another
  subscriber, no mDNS reconfirm), an ordinary query on its session is REFUSED;
* positive controls: the allowed client on the same transport gets the instance (its
  label found by the same byte search), and its request does show up as an mDNS query in
  the capture; its RECONFIRMs are acted on.

test_repeated_link_refusals_counted: repeated, byte-identical link-view refusals are counted
per link like repeated ACL refusals (neither is replayed). A last test reloads (SIGHUP) a
configuration that takes a subscription away from one client by its view and from another
by the ACL: both sessions get a unidirectional Retry Delay with REFUSED and end 5 s later;
an unaffected session stays."""

import contextlib
import os
import signal
import socket
import ssl
import struct
import threading
import time
import uuid

import dns.message
import dns.name
import dns.rcode
import dns.rdatatype as T
import dns.reversename
import pytest

import dso
import lab as L
from dso import Client, message, reconfirm_tlv, subscribe_tlv, tlv, unsubscribe_tlv
from helpers import ZONE1, ZONE2, make_query, name
from test_admin import metric, scrape

PORT, TLS_PORT = 5320, 8863
ADMIN = PORT + 3000  # the lab convention (lab.start_proxy)

NS_T = L.NS_PREFIX + "tc"
R_IF_T, T_IF = "dpr-tc", "dptc-r"
R_T = "203.0.113.1"
ALLOWED, ALLOWED2, HIDDEN, OUTSIDE = "203.0.113.10", "203.0.113.11", "203.0.113.20", "203.0.113.130"

CONFIG = """\
links:
  - interface: %(if1)s
    domain: %(z1)s
    clients: [%(view1)s]
  - interface: %(if2)s
    domain: %(z2)s
allow-clients: [%(acl)s]
server-name: %(server)s
log-level: debug
push:
  on-tcp: true
"""
ACL = "203.0.113.0/27, 127.0.0.0/8"
VIEW1 = "203.0.113.0/28, 127.0.0.0/8"
# The reload: link 1 for loopback only (203.0.113.10 loses it), and 203.0.113.11 out of the ACL.
RELOAD_ACL = "203.0.113.10/32, 203.0.113.16/28, 127.0.0.0/8"
RELOAD_VIEW1 = "127.0.0.0/8"

RETRY_300S = struct.pack(">I", 300000)
WAIT_NO_MDNS = 2.0  # seconds without an mDNS query before concluding that none was started

IPP1, IPP2 = name("_ipp", "_tcp"), name("_ipp", "_tcp", zone=ZONE2)
P1, P2 = name("Printer One", "_ipp", "_tcp"), name("Printer Two", "_ipp", "_tcp", zone=ZONE2)
SVCS1 = name("_services", "_dns-sd", "_udp")
ENUM2 = name("b", "_dns-sd", "_udp", zone=ZONE2)
LB2 = name("lb", "_dns-sd", "_udp", zone=ZONE2)
ENUM_REV2 = dns.name.from_text("b._dns-sd._udp.0.100.51.198.in-addr.arpa.")  # link 2's subnet (RFC 6763 §11)
REV4 = dns.reversename.from_address(L.L1_V4)   # 10.2.0.192.in-addr.arpa. (link 1)
REV6 = dns.reversename.from_address(L.L1_V6)   # ...1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa. (link 1)
# Link 1 addresses no device has and no other test asks about. The capture cannot tell which
# avahi client asked: REV4/REV6 (farhost1's, asked by test_reverse and test_host_zone through
# the lab's own proxy) are queried again by avahi-daemon on its own schedule, so the "no mDNS
# query" checks watch these two, which only a refused question here could put on the link.
FRESH_REV4 = dns.reversename.from_address("192.0.2.203")
FRESH_REV6 = dns.reversename.from_address("2001:db8:1::203")

# Nothing of link 1 may reach the hidden client; nothing of either link the refused one.
HIDDEN_BYTES = (b"secret", b"printer one", b"farhost1", b"zc-host", b"drucker")
OUTSIDE_BYTES = (b"secret", b"printer", b"farhost", b"zc-host", b"drucker", b"bulk")


# ---------------------------------------------------------------------------
# the client namespace, the services, the proxy
# ---------------------------------------------------------------------------

def _drop_client_ns():
    L.drop_netns(NS_T)


def _make_client_ns():
    _drop_client_ns()
    L.run(["ip", "netns", "add", NS_T])
    L.nsrun(NS_T, ["ip", "link", "set", "lo", "up"])
    L.run(["ip", "link", "add", R_IF_T, "netns", L.NS_R, "type", "veth", "peer", "name", T_IF, "netns", NS_T])
    for ns, ifn in ((L.NS_R, R_IF_T), (NS_T, T_IF)):
        # IPv4 only: no IPv6 router solicitations or link-local noise from this link
        L.nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.%s.disable_ipv6=1" % ifn])
    L.nsrun(L.NS_R, ["ip", "addr", "add", R_T + "/24", "dev", R_IF_T])
    for a in (ALLOWED, ALLOWED2, HIDDEN, OUTSIDE):
        L.nsrun(NS_T, ["ip", "addr", "add", a + "/24", "dev", T_IF])
    for ns, ifn in ((L.NS_R, R_IF_T), (NS_T, T_IF)):
        L.nsrun(ns, ["ip", "link", "set", ifn, "up"])


def _config(acl=ACL, view1=VIEW1):
    return CONFIG % dict(if1=L.R_IF1, z1=L.ZONE1, view1=view1, if2=L.R_IF2, z2=L.ZONE2, acl=acl,
                         server=L.SERVER_NAME)


class Secret:
    """One transport's service type on link 1 and its instance."""

    def __init__(self, tag, hexid):
        self.label = "_trust%s%s" % (tag, hexid)          # <= 15 characters (RFC 6763 §7.2)
        self.stype = self.label + "._tcp"
        self.instance = "Secret %s %s" % (tag.upper(), hexid)
        self.ptr = name(self.label, "_tcp")              # in lab1.example.
        self.inst = name(self.instance, self.label, "_tcp")
        self.mdns = (self.label + "._tcp.local.").lower()


@pytest.fixture(scope="module")
def trust(lab):
    hexid = uuid.uuid4().hex[:5]
    secrets = {t: Secret(t, hexid) for t in "utdsr"}
    paths = lab.add_far_services(
        "avahi-l1", [(s.instance, s.stype, 7100 + i, [], [b"trust=1"]) for i, s in enumerate(secrets.values())],
        prefix="trust")
    _make_client_ns()
    cfg = os.path.join(lab.dir, "trust.yaml")
    with open(cfg, "w") as f:
        f.write(_config())
    state = os.path.join(lab.dir, "trust-state")
    try:
        lab.start_proxy(["--config", cfg, "--listen", "%s:%d" % (R_T, PORT),
                         "--push-listen", "%s:%d" % (R_T, TLS_PORT), "--state-dir", state],
                        name="trust", port=PORT, v6=False, links=False)
        ctx = {"secrets": secrets, "config": cfg, "ends": {}, "cert": os.path.join(state, "push-tls-cert.pem"),
               "pid": lab.procs["trust"].pid}
        # Link 1's printers in the cache (an allowed client asked): the hidden client must not
        # get them from there either.
        L.wait_for(lambda: P1 in _ptrs(_udp(ALLOWED, make_query(IPP1, T.PTR))[0], IPP1), 10,
                   interval=0.5, what="Printer One for an allowed client")
        yield ctx
    finally:
        if os.environ.get("DPT_DUMP_TRUST_LOG"):
            lab.dump_logs(["trust"], tail=100000)
        lab.stop_proc("trust")
        lab.remove_far_services(paths)
        _drop_client_ns()


# ---------------------------------------------------------------------------
# clients (all in NS_T, each from its own source address)
# ---------------------------------------------------------------------------

def _udp(src, q, timeout=5.0, linger=0.0):
    """One query over UDP from `src`: (the first datagram, every datagram received). With
    `linger`, datagrams arriving that much longer are collected as well."""
    with L.netns(NS_T):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind((src, 0))
        s.settimeout(timeout)
        s.sendto(q.to_wire(), (R_T, PORT))
        got = [s.recvfrom(65535)[0]]
        if linger:
            s.settimeout(linger)
            with contextlib.suppress(socket.timeout):
                while True:
                    got.append(s.recvfrom(65535)[0])
        return dns.message.from_wire(got[0]), got
    finally:
        s.close()


def _dso(src, tls, trust, timeout=10.0):
    """A DSO client connection from `src` in NS_T: TLS (certificate checked) or cleartext TCP."""
    if tls:
        return Client(TLS_PORT, cafile=trust["cert"], server_hostname="ns.example", timeout=timeout,
                      ns=NS_T, host=R_T, source=src)
    return Client(PORT, tls=False, timeout=timeout, ns=NS_T, host=R_T, source=src)


def _tcp_query(c, q, timeout=5.0):
    """An ordinary query on a stream connection (dso.Client framing); DSO messages (PUSHes of
    the connection's session) arriving before the response are skipped."""
    c.send(q.to_wire())
    deadline = time.monotonic() + timeout
    while True:
        m = c.recv(max(0.05, deadline - time.monotonic()))
        if m.opcode != 6:
            break
    r = dns.message.from_wire(m.wire)
    assert r.id == q.id
    return r


def _ptrs(r, qname):
    return {rd.target for rs in r.answer if rs.name == qname and rs.rdtype == T.PTR for rd in rs}


def _assert_refused(r, what):
    assert r.rcode() == dns.rcode.REFUSED, "%s: %s, want REFUSED\n%s" % (what, dns.rcode.to_text(r.rcode()), r)
    assert not r.answer and not r.authority, "%s: REFUSED with records:\n%s" % (what, r)
    assert all(rs.rdtype == T.OPT for rs in r.additional), "%s: REFUSED with records:\n%s" % (what, r)


def _assert_clean(data, forbidden, who):
    low = bytes(data).lower()
    for f in forbidden:
        assert f not in low, "%s received %r: %r" % (who, f, bytes(data))


TCP_CLOSE, TCP_CLOSE_WAIT = 7, 8  # tcpi_state (include/net/tcp_states.h)


def _tcp_state(c):
    return c.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


class EndWatch(threading.Thread):
    """Watches a connection in the background until the server ends it, for at most `timeout`
    seconds. `end`: (seconds, how) when the stream ended for the client: "reset" (TCP RST),
    "fin", or "close_notify" (TLS: the session is over, the TCP connection may stay open);
    `tcp`: (seconds, "reset" | "fin") when the TCP connection itself ended. None: not seen."""

    def __init__(self, c, timeout):
        super().__init__(daemon=True)
        self.c, self.timeout = c, timeout
        self.end = self.tcp = None
        self.start()

    def run(self):
        c = self.c
        t0 = time.monotonic()
        deadline = t0 + self.timeout
        while True:
            try:
                c._fill(deadline)
            except TimeoutError:
                return
            except (ConnectionError, OSError, ssl.SSLError) as e:
                dt = time.monotonic() - t0
                if isinstance(e, ConnectionResetError) or "reset" in str(e).lower():
                    self.end = self.tcp = (dt, "reset")
                    return
                break
        self.end = (dt, "close_notify" if isinstance(c.sock, ssl.SSLSocket) else "fin")
        while time.monotonic() < deadline:
            state = _tcp_state(c)
            if state == TCP_CLOSE:
                self.tcp = (time.monotonic() - t0, "reset")
                break
            if state == TCP_CLOSE_WAIT:
                time.sleep(0.05)  # a FIN; an RST right after it (SO_LINGER 0) still counts as one
                self.tcp = (time.monotonic() - t0, "reset" if _tcp_state(c) == TCP_CLOSE else "fin")
                break
            time.sleep(0.02)
        if self.end[1] == "fin" and self.tcp:
            self.end = self.tcp

    def outcome(self):
        self.join(self.timeout + 2)
        return self


# ---------------------------------------------------------------------------
# observations: mDNS capture, metrics, log
# ---------------------------------------------------------------------------

def _mdns_asked(lab, since, names):
    """The router's mDNS queries since `since` (wall clock) for any of `names` (lower-case text)."""
    return [(round(ts - since, 3), qn, T.to_text(qt)) for ts, qn, qt, _src in lab.capture.queries(since=since)
            if qn in names]


def _assert_no_mdns(lab, since, names):
    left = since + WAIT_NO_MDNS - time.time()
    if left > 0:
        time.sleep(left)
    asked = _mdns_asked(lab, since, names)
    assert not asked, "mDNS queries started for a refused client: %s" % asked


def _assert_mdns_seen(lab, since, qname):
    # 20 s: the query itself goes out within milliseconds, but on a busy machine the poll
    # (reading the capture's new packets, lab.PcapTail) can lag by seconds
    L.wait_for(lambda: _mdns_asked(lab, since, {qname}), 20, interval=0.2,
               what="an mDNS query for %s after the allowed client's request (positive control of the capture)" % qname)


class Counters:
    NAMES = (("acl", "dns_acl_refused_total", {}), ("refused", "dns_refused_queries_total", {}),
             ("link1", "dns_link_refused_total", {"link": L.R_IF1}),
             ("link2", "dns_link_refused_total", {"link": L.R_IF2}))

    def __init__(self):
        samples, _typed = scrape(port=ADMIN)
        self.v = {k: metric(samples, n, **lb) for k, n, lb in self.NAMES}

    def delta(self, before):
        return {k: self.v[k] - before.v[k] for k in self.v}


def _log_mark(lab):
    return len(lab.log_text("trust", 10 ** 7).splitlines())


def _log_since(lab, mark):
    return lab.log_text("trust", 10 ** 7).splitlines()[mark:]


# ---------------------------------------------------------------------------
# plain DNS: UDP and TCP
# ---------------------------------------------------------------------------

def _assert_all_refused(ask, src, questions, secrets, who):
    """Each (name, type) asked from `src` is REFUSED, and no byte received holds `secrets`."""
    raw = b""
    for qn, qt in questions:
        r, data = ask(src, make_query(qn, qt))
        _assert_refused(r, "%s %s from %s" % (qn, T.to_text(qt), src))
        raw += data
    _assert_clean(raw, secrets, who)


def _plain_case(lab, trust, tag, ask):
    """The plain-query story for one transport; `ask(src, q)` -> (response, raw bytes)."""
    s = trust["secrets"][tag]
    upper = dns.name.from_text(s.ptr.to_text().upper())
    c0 = Counters()
    t0 = time.time()

    # (a) outside allow-clients: REFUSED for everything, link 1 and link 2 alike
    outside = [(s.ptr, T.PTR), (IPP2, T.PTR), (ZONE1, T.SOA), (ZONE2, T.SOA)]
    _assert_all_refused(ask, OUTSIDE, outside, OUTSIDE_BYTES, "the client outside allow-clients")

    # (b) hidden by link 1's view: REFUSED for link 1's zones (forward, any case, cached
    # names, reverse v4 and v6, apex); link 2 served, enumeration without link 1
    hidden = [(s.ptr, T.PTR), (upper, T.PTR), (IPP1, T.PTR), (SVCS1, T.PTR), (REV4, T.PTR), (REV6, T.PTR),
              (FRESH_REV4, T.PTR), (FRESH_REV6, T.PTR), (ZONE1, T.SOA)]
    _assert_all_refused(ask, HIDDEN, hidden, HIDDEN_BYTES, "the client hidden from link 1")
    r, data = ask(HIDDEN, make_query(ZONE2, T.SOA))
    assert r.rcode() == dns.rcode.NOERROR and r.answer, "link 2 not served to the hidden client: %s" % r
    for qn in (ENUM2, LB2, ENUM_REV2):
        r, data = ask(HIDDEN, make_query(qn, T.PTR))
        assert r.rcode() == dns.rcode.NOERROR and _ptrs(r, qn) == {ZONE2}, \
            "browse-domain enumeration for the hidden client: %s" % r
        assert b"lab1" not in data.lower(), "link 1's zone listed to the hidden client: %r" % data

    c1 = Counters()
    assert c1.delta(c0) == {"acl": len(outside), "refused": len(outside) + len(hidden), "link1": len(hidden),
                            "link2": 0}, c1.delta(c0)
    _assert_no_mdns(lab, t0, {s.mdns, FRESH_REV4.to_text().lower(), FRESH_REV6.to_text().lower()})

    # positive control: an allowed client on the same transport gets the instance, and its
    # question does reach the link
    t1 = time.time()

    def found():
        r, data = ask(ALLOWED, make_query(s.ptr, T.PTR))
        # the instance label is in the raw bytes (what the byte searches above look for)
        return s.inst in _ptrs(r, s.ptr) and s.instance.lower().encode() in data.lower()
    L.wait_for(found, 10, interval=0.5, what="%s for the allowed client %s" % (s.instance, ALLOWED))
    _assert_mdns_seen(lab, t1, s.mdns)
    c2 = Counters()
    assert c2.delta(c1) == {"acl": 0, "refused": 0, "link1": 0, "link2": 0}, c2.delta(c1)


def test_plain_udp(lab, trust):
    def ask(src, q):
        r, got = _udp(src, q, linger=0.2)
        assert len(got) == 1, "%d datagrams for one query from %s" % (len(got), src)
        return r, got[0]
    _plain_case(lab, trust, "u", ask)


def test_plain_tcp(lab, trust):
    conns, got = {}, {}

    def ask(src, q):
        c = conns.get(src) or conns.setdefault(src, _dso(src, False, trust))
        before = len(c.received)
        try:
            r = _tcp_query(c, q)
        except (ConnectionError, OSError):
            # Late in a full suite the capture checks take longer than RFC 7766's 10 s idle
            # timeout, which then closes the connection: ask again on a new one.
            c.close()
            c = conns[src] = _dso(src, False, trust)
            before = 0
            r = _tcp_query(c, q)
        data = c.received[before:]
        got[src] = got.get(src, b"") + data
        return r, data
    try:
        # REFUSED does not close the connection, and nothing comes unasked (checked at once,
        # well within the idle timeout)
        for src, refused in ((OUTSIDE, ZONE2), (HIDDEN, ZONE1)):
            r, _ = ask(src, make_query(refused, T.SOA))
            _assert_refused(r, "%s SOA from %s" % (refused, src))
            c = conns[src]
            n = len(c.received)
            with pytest.raises(TimeoutError):
                c.recv(0.3)
            assert len(c.received) == n
            r = _tcp_query(c, make_query(ZONE2, T.SOA))
            assert r.rcode() == (dns.rcode.REFUSED if src == OUTSIDE else dns.rcode.NOERROR), r
        _plain_case(lab, trust, "t", ask)
        _assert_clean(got[OUTSIDE], OUTSIDE_BYTES, "the client outside allow-clients (TCP)")
        _assert_clean(got[HIDDEN], HIDDEN_BYTES, "the client hidden from link 1 (TCP)")
    finally:
        for c in conns.values():
            c.close()


# ---------------------------------------------------------------------------
# DNS Push: DSO over TCP (on-tcp) and over TLS
# ---------------------------------------------------------------------------

def _expect_refusal(r, mid):
    assert r.qr and r.id == mid and r.opcode == 6, (r.qr, r.id, r.opcode)
    assert r.rcode == dso.REFUSED, "rcode %d, want REFUSED" % r.rcode
    assert r.counts == [0, 0, 0, 0], r.counts
    assert r.tlvs == [(dso.RETRY_DELAY, RETRY_300S)], "want only a Retry Delay of 300 s: %r" % r.tlvs


def _push_targets(c, timeout, want):
    """Read PUSHes until one adds a PTR to `want`: every target seen."""
    seen = set()
    deadline = time.monotonic() + timeout
    while want not in seen:
        r = c.recv(max(0.05, deadline - time.monotonic()))
        assert r.id == 0 and not r.qr and r.tlv(dso.PUSH) is not None, "expected a PUSH: %r" % r.tlvs
        seen |= {ch[4].target for ch in r.changes() if ch[4] is not None and ch[1] == T.PTR}
    return seen


def _dso_case(lab, trust, tag, tls):
    s = trust["secrets"][tag]
    mark = _log_mark(lab)
    c0 = Counters()
    t0 = time.time()

    # (a) outside allow-clients: no session, whatever the first message
    refused_sub = _dso(OUTSIDE, tls, trust)
    r = refused_sub.request(message(0x51, subscribe_tlv(s.ptr, T.PTR)))
    _expect_refusal(r, 0x51)
    # nothing more is read: a Keepalive, another SUBSCRIBE and a plain query go unanswered
    refused_sub.send(message(0x52, dso.keepalive_tlv()))
    refused_sub.send(message(0x53, subscribe_tlv(IPP2, T.PTR)))
    refused_sub.send(make_query(ZONE2, T.SOA).to_wire())
    watch_sub = EndWatch(refused_sub, 8)

    refused_ka = _dso(OUTSIDE, tls, trust)
    r = _tcp_query(refused_ka, make_query(IPP2, T.PTR))  # an ordinary query first: REFUSED too
    _assert_refused(r, "a query before DSO from %s" % OUTSIDE)
    _expect_refusal(refused_ka.request(message(0x61, dso.keepalive_tlv())), 0x61)
    _assert_clean(refused_ka.received, OUTSIDE_BYTES, "the client outside allow-clients")
    refused_ka.close()  # the client may close first (RFC 8490 §6.6.1)

    first_uni = {}
    for kind, wire in (("RECONFIRM", message(0, reconfirm_tlv(s.ptr, T.PTR, s.inst.to_wire()))),
                       ("UNSUBSCRIBE", message(0, unsubscribe_tlv(0x51)))):
        c = _dso(OUTSIDE, tls, trust)
        c.send(wire)
        first_uni[kind] = EndWatch(c, 3)

    # (b) hidden from link 1: a session (for link 2), every link-1 SUBSCRIBE refused
    hid = _dso(HIDDEN, tls, trust)
    hid.establish()
    upper = s.ptr.to_text().upper()
    hidden_subs = [(s.ptr, T.PTR), (upper, T.PTR), (IPP1, T.PTR), (IPP1, 255), (SVCS1, T.PTR), (REV4, T.PTR),
                   (REV6, T.PTR), (FRESH_REV4, T.PTR), (FRESH_REV6, T.PTR), (ZONE1, T.SOA)]
    for i, (qn, qt) in enumerate(hidden_subs):
        r = hid.request(message(0x100 + i, subscribe_tlv(qn, qt)))
        assert r.qr and r.id == 0x100 + i and r.rcode == dso.REFUSED, \
            "SUBSCRIBE %s %s from %s: rcode %d, want REFUSED" % (qn, qt, HIDDEN, r.rcode)
        assert r.tlv(dso.RETRY_DELAY) is not None, "REFUSED SUBSCRIBE without a Retry Delay"
    # RECONFIRM about link 1: ignored (nothing held yet: would do nothing anyway; see below)
    hid.send(message(0, reconfirm_tlv(s.ptr, T.PTR, s.inst.to_wire())))
    # the session goes on, for link 2 only; browse-domain enumeration lists link 2 alone
    for i, qn in enumerate((ENUM2, ENUM_REV2)):
        r = hid.request(message(0x200 + i, subscribe_tlv(qn, T.PTR)))
        assert r.rcode == dso.NOERROR, r.rcode
        enum = hid.recv(5)
        assert enum.id == 0 and enum.tlv(dso.PUSH) is not None
        assert {ch[4].target for ch in enum.changes()} == {ZONE2}, "enumeration PUSH: %s" % enum.changes()
    r = hid.request(message(0x210, subscribe_tlv(IPP2, T.PTR)))
    assert r.rcode == dso.NOERROR, r.rcode
    _push_targets(hid, 10, P2)

    c1 = Counters()
    n_hidden = len(hidden_subs) + 1  # + the RECONFIRM
    assert c1.delta(c0) == {"acl": 3, "refused": 3 + n_hidden, "link1": n_hidden, "link2": 0}, c1.delta(c0)
    L.wait_for(lambda: metric(scrape(port=ADMIN)[0], "dns_push_sessions") == 1, 3, interval=0.2,
               what="dns_push_sessions == 1 (only the hidden client's session; refused clients hold none)")
    _assert_no_mdns(lab, t0, {s.mdns, FRESH_REV4.to_text().lower(), FRESH_REV6.to_text().lower()})

    log = "\n".join(_log_since(lab, mark))
    for req in ("SUBSCRIBE", "Keepalive"):
        assert any("client not allowed" in ln and "dns.request=%s " % req in ln and "dns.client=%s " % OUTSIDE in ln
                   for ln in log.splitlines()), \
            "no debug line 'client not allowed' for %s from %s:\n%s" % (req, OUTSIDE, log[-3000:])

    # positive control: the allowed client gets the instance, and its question reaches the link
    t1 = time.time()
    ok = _dso(ALLOWED, tls, trust)
    try:
        r = ok.request(message(0x300, subscribe_tlv(s.ptr, T.PTR)))
        assert r.rcode == dso.NOERROR, r.rcode
        _push_targets(ok, 10, s.inst)
        assert s.instance.lower().encode() in ok.received.lower(), "the byte search would not find the instance"
        _assert_mdns_seen(lab, t1, s.mdns)

        # RECONFIRM from the hidden client about link 1, now that the browse holds the
        # instance: a record not held would be removed from every subscriber (the allowed
        # client), a held one handed to mDNS. Neither happens.
        mark = _log_mark(lab)
        ghost = name("Ghost %s" % uuid.uuid4().hex[:6], s.label, "_tcp")
        hid.send(message(0, reconfirm_tlv(s.ptr, T.PTR, ghost.to_wire())))
        hid.send(message(0, reconfirm_tlv(s.ptr, T.PTR, s.inst.to_wire())))
        with pytest.raises(TimeoutError):
            r = ok.recv(1.5)
            pytest.fail("the allowed subscriber got a PUSH after the hidden client's RECONFIRM: %s" % r.changes())
        log = _log_since(lab, mark)
        assert not [ln for ln in log if "RECONFIRM: " in ln or "mDNS reconfirm" in ln], \
            "the hidden client's RECONFIRM was acted on:\n%s" % "\n".join(log)
        assert len([ln for ln in log if "client may not see this link" in ln and "dns.request=RECONFIRM " in ln
                    and "dns.client=%s " % HIDDEN in ln and "proxy.link=%s " % L.R_IF1 in ln]) == 2, \
            "\n".join(log)
        # control: the same RECONFIRMs from the allowed client are acted on
        ok.send(message(0, reconfirm_tlv(s.ptr, T.PTR, ghost.to_wire())))
        ch, _dt = ok.push_changes(3, lambda ch: ch[3] == dso.REMOVE_ONE)
        assert ch[4].target == ghost
        ok.send(message(0, reconfirm_tlv(s.ptr, T.PTR, s.inst.to_wire())))
        L.wait_for(lambda: any("RECONFIRM: asking mDNS" in ln for ln in _log_since(lab, mark)), 3, interval=0.1,
                   what="the allowed client's RECONFIRM to be handed to mDNS")

        assert hid.request(message(0x400, dso.keepalive_tlv())).rcode == dso.NOERROR
        # every DSO byte the hidden client got: not even link 1's zone name
        _assert_clean(hid.received, HIDDEN_BYTES + (b"lab1",), "the hidden client (DSO)")
        # an ordinary query on its session: REFUSED as well (its echoed question names lab1)
        _assert_refused(_tcp_query(hid, make_query(s.ptr, T.PTR)), "a query on the session of %s" % HIDDEN)
        _assert_clean(hid.received, HIDDEN_BYTES, "the hidden client (DSO)")
        c2 = Counters()
        assert c2.delta(c1) == {"acl": 0, "refused": 3, "link1": 3, "link2": 0}, c2.delta(c1)
    finally:
        ok.close()
        hid.close()

    # The refused client's connections. A unidirectional first message is fatal (RFC 8490
    # §5.1, §5.3): ended at once, nothing sent.
    ends = trust["ends"].setdefault("tls" if tls else "tcp", {})
    for kind, w in first_uni.items():
        w.outcome()
        ends[kind] = w
        assert w.end is not None and w.end[0] < 1.0, \
            "%s as first message from %s: connection not ended at once (%s)" % (kind, OUTSIDE, w.end)
        assert w.c.received == b"", "%s as first message: got %r" % (kind, w.c.received)
        w.c.close()
    # The refused SUBSCRIBE: its one REFUSED, nothing for what followed, the end 5 s later.
    watch_sub.outcome()
    ends["grace"] = watch_sub
    assert watch_sub.end is not None and 3.5 <= watch_sub.end[0] <= 7.5, \
        "the refused client's connection ended after %s, want 5 s (the Retry Delay grace)" % (watch_sub.end,)
    want = message(0x51, tlv(dso.RETRY_DELAY, RETRY_300S), qr=True, rcode=dso.REFUSED)
    assert refused_sub.received == struct.pack(">H", len(want)) + want, \
        "the refused client got more than its one REFUSED: %r" % refused_sub.received
    refused_sub.close()
    if not tls:
        # cleartext: each of those ends is a TCP reset (TLS: test_tls_abort_is_a_tcp_reset)
        for kind, w in ends.items():
            assert w.end[1] == "reset", "%s: the connection ended with %s, want a reset" % (kind, w.end)


def test_dso_over_tcp(lab, trust):
    _dso_case(lab, trust, "d", tls=False)


def test_dso_over_tls(lab, trust):
    _dso_case(lab, trust, "s", tls=True)


def test_tls_abort_is_a_tcp_reset(trust):
    """RFC 8490 §5.3 ("forcibly abort": a TCP RST) on the TLS listener as on cleartext TCP: a
    unidirectional first message resets the connection at once, and the connection of a
    client sent a Retry Delay is reset when the 5 s grace ends (measured in test_dso_over_tls)."""
    ends = trust["ends"].get("tls")
    if not ends:
        pytest.skip("test_dso_over_tls did not run")
    report = {k: (w.end, w.tcp) for k, w in ends.items()}
    for kind in ("RECONFIRM", "UNSUBSCRIBE"):
        tcp = ends[kind].tcp
        assert tcp is not None and tcp[1] == "reset" and tcp[0] < 1.0, report
    tcp = ends["grace"].tcp
    assert tcp is not None and tcp[1] == "reset" and 3.5 <= tcp[0] <= 7.5, report


def test_repeated_link_refusals_counted(lab, trust):
    """The same query three times from the client hidden from link 1 (and, as the control,
    from the client outside allow-clients): three REFUSED answers, each counted, in
    dns_link_refused_total{link} as in dns_refused_queries_total."""
    c0 = Counters()
    for src, label in ((OUTSIDE, "_again-acl"), (HIDDEN, "_again-view")):
        q = make_query(name(label, "_tcp"), T.PTR)
        for i in range(3):
            q.id = 0x7100 + i
            r, _ = _udp(src, q)
            _assert_refused(r, "%s, time %d, from %s" % (q.question[0].name, i + 1, src))
    # replays are reported in batches, about once a second
    L.wait_for(lambda: Counters().delta(c0)["refused"] >= 6, 4, interval=0.2, what="six refusals counted")
    time.sleep(1.2)
    assert Counters().delta(c0) == {"acl": 3, "refused": 6, "link1": 3, "link2": 0}, Counters().delta(c0)


# ---------------------------------------------------------------------------
# reload
# ---------------------------------------------------------------------------

def _reload(lab, trust, text):
    """Rewrite the proxy's configuration file and SIGHUP it (by its PID); wait until applied."""
    tmp = trust["config"] + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, trust["config"])
    before = lab.log_text("trust", 10 ** 7).count("configuration reloaded")
    os.kill(trust["pid"], signal.SIGHUP)
    L.wait_for(lambda: lab.log_text("trust", 10 ** 7).count("configuration reloaded") > before, 5,
               interval=0.1, what="the reload")


def test_reload_revokes_hidden_subscriptions(lab, trust):
    """SIGHUP with link 1 hidden from 203.0.113.10 and 203.0.113.11 out of the ACL: their
    sessions get a unidirectional Retry Delay (RCODE REFUSED, 300 s), nothing after it, and a
    reset 5 s later; the hidden client's link-2 session is untouched."""
    s = trust["secrets"]["r"]
    view_lost = _dso(ALLOWED, True, trust)            # TLS, subscribed to link 1
    acl_lost = _dso(ALLOWED2, False, trust)           # cleartext, subscribed to link 2
    stays = _dso(HIDDEN, True, trust)                 # TLS, subscribed to link 2
    try:
        assert view_lost.request(message(1, subscribe_tlv(s.ptr, T.PTR))).rcode == dso.NOERROR
        _push_targets(view_lost, 10, s.inst)
        for c in (acl_lost, stays):
            assert c.request(message(1, subscribe_tlv(IPP2, T.PTR))).rcode == dso.NOERROR
            _push_targets(c, 10, P2)
        marks = {c: len(c.received) for c in (view_lost, acl_lost, stays)}

        _reload(lab, trust, _config(acl=RELOAD_ACL, view1=RELOAD_VIEW1))

        for c, who in ((view_lost, "view"), (acl_lost, "ACL")):
            r = c.recv(3)
            assert r.id == 0 and not r.qr and r.opcode == 6, "%s: want a unidirectional message" % who
            assert r.rcode == dso.REFUSED and r.tlvs == [(dso.RETRY_DELAY, RETRY_300S)], (who, r.rcode, r.tlvs)
        watches = [(EndWatch(c, 7.5), c, who) for c, who in ((view_lost, "view"), (acl_lost, "ACL"))]
        for w, c, who in watches:
            w.outcome()
            assert w.end is not None and 3.5 <= w.end[0] <= 7.5, \
                "%s-revoked session: ended after %s, want the 5 s grace" % (who, w.end)
            assert len(c.received) == marks[c] + 2 + 12 + 8, "%s-revoked session got more than its Retry Delay" % who
        assert watches[1][0].end[1] == "reset", "cleartext session after the grace: %s, want a reset" % (watches[1][0].end,)
        with pytest.raises(TimeoutError):
            stays.recv(0.2)
        assert len(stays.received) == marks[stays], "the unaffected session was told something"
        assert stays.request(message(2, dso.keepalive_tlv())).rcode == dso.NOERROR
        # and the plain listener agrees
        r, _ = _udp(ALLOWED, make_query(s.ptr, T.PTR))
        _assert_refused(r, "link 1 for %s after the reload" % ALLOWED)
        r, _ = _udp(ALLOWED2, make_query(IPP2, T.PTR))
        _assert_refused(r, "link 2 for %s after the reload" % ALLOWED2)
    finally:
        for c in (view_lost, acl_lost, stays):
            c.close()
        _reload(lab, trust, _config())



