"""Configuration reload (SIGHUP and POST /reload), per-link service filters and the client
ACL (issue "reload / filters / ACL"; config/discovery-proxy.yaml `links[].services`,
`allow-clients`; RFC 8766 §9.2). Each test runs its own proxy in dpt-r with
`--config <tmp yaml>` on its own DNS port and admin port; the file is rewritten and the
proxy signalled by its PID."""

import http.client
import json
import os
import re
import signal
import socket
import time

import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import ZONE2, browse_until, make_query, name, ptr_targets, query, rrset

PORT = 5350
ADMIN = PORT + 3000  # the lab convention (lab.start_proxy)

IPP1 = name("_ipp", "_tcp")
HTTP1 = name("_http", "_tcp")
P1 = name("Printer One", "_ipp", "_tcp")
WEB1 = name("Web One", "_http", "_tcp")
SUB1 = name("_universal", "_sub", "_ipp", "_tcp")
SVCS1 = name("_services", "_dns-sd", "_udp")
IPP2 = name("_ipp", "_tcp", zone=ZONE2)
P2 = name("Printer Two", "_ipp", "_tcp", zone=ZONE2)
SVCS2 = name("_services", "_dns-sd", "_udp", zone=ZONE2)

LINK1 = "  - interface: %s\n    domain: %s\n" % (L.R_IF1, L.ZONE1)
LINK2 = "  - interface: %s\n    domain: %s\n" % (L.R_IF2, L.ZONE2)


def config(*links, extra=""):
    return "links:\n" + "".join(links) + "server-name: %s\nlog-level: debug\n" % L.SERVER_NAME + extra


def admin_http(method, path, body=None, headers=None, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", ADMIN, timeout=timeout)
    with L.netns(L.NS_R):
        conn.connect()
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


def api():
    status, body = admin_http("GET", "/api/services")
    assert status == 200, (status, body)
    return json.loads(body)


def metric_value(sample_name):
    """Value of an unlabelled sample on /metrics (0 when not exported yet)."""
    status, body = admin_http("GET", "/metrics")
    assert status == 200, status
    for line in body.splitlines():
        m = re.match(r"^%s(?:\{\})?\s+(\S+)" % re.escape(sample_name), line)
        if m:
            return float(m.group(1))
    return 0.0


def q(qname, rdtype, **kw):
    kw.setdefault("check", False)
    return query(qname, rdtype, port=PORT, **kw)


def names_of(r, qname):
    return {t.relativize(qname) for t in ptr_targets(r, qname)}


class Proxy:
    """A proxy in dpt-r reading `path`, listening on 127.0.0.1:PORT (+ extra --listen)."""

    def __init__(self, lab, tmp_path, text, listen=()):
        self.lab = lab
        self.path = tmp_path / "proxy.yaml"
        self.name = "proxy-reload"
        self.write(text)
        cmd = [L.Lab.proxy_bin(), "--config", str(self.path), "--listen", "127.0.0.1:%d" % PORT]
        for a in listen:
            cmd += ["--listen", a]
        cmd += ["--admin", "127.0.0.1:%d" % ADMIN]
        lab.stop_proc(self.name)
        self.proc = lab.spawn(L.NS_R, cmd, self.name,
                              env_extra={"DBUS_SYSTEM_BUS_ADDRESS": lab.dbus_addr})
        self.pid = self.proc.pid

        def ready():
            lab.check_alive(self.name)
            r, _ = q(L.ZONE1, T.SOA, timeout=1)  # NOERROR, or REFUSED by the ACL: it answers
            return r is not None and admin_http("GET", "/healthz", timeout=2)[0] == 200
        L.wait_for(ready, 30, interval=0.3, what="the reload proxy to answer")

    def write(self, text):
        tmp = str(self.path) + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, self.path)

    def log(self):
        return self.lab.log_text(self.name, 100000)

    def hup(self, text, marker="configuration reloaded"):
        """Rewrite the file, SIGHUP the proxy, wait for `marker` to be logged once more."""
        self.write(text)
        before = self.log().count(marker)
        os.kill(self.pid, signal.SIGHUP)
        L.wait_for(lambda: self.log().count(marker) > before, 5, interval=0.1,
                   what="%r in the proxy log after SIGHUP" % marker)
        assert self.proc.poll() is None, "the proxy exited on SIGHUP:\n%s" % self.log()[-3000:]

    def stop(self):
        self.lab.stop_proc(self.name)


@pytest.fixture
def start(lab, tmp_path):
    started = []

    def _start(text, **kw):
        p = Proxy(lab, tmp_path, text, **kw)
        started.append(p)
        return p
    yield _start
    for p in started:
        if p.proc.poll() is not None:
            print("proxy log:\n" + p.log()[-4000:])
        p.stop()


def soa_ok(zone):
    r, dt = q(zone, T.SOA, timeout=3)
    return r.rcode() == dns.rcode.NOERROR and rrset(r, zone, T.SOA) is not None and dt < 1.0


# ---------------------------------------------------------------------------

def test_sighup_adds_link_without_dropping_listener(lab, start):
    """Issue "reload": SIGHUP re-reads --config and applies a new link without restarting
    the listeners: with only link 1 configured, lab2 is outside every zone (REFUSED,
    RFC 8766 §5.1); after the file gains link 2 and the proxy gets SIGHUP, lab2 is served
    (SOA, browse with its instance), the same process answers lab1 right before and right
    after the signal, and link 1's browse cache survives the reload."""
    p = start(config(LINK1))
    r, _ = q(L.ZONE2, T.SOA)
    assert r.rcode() == dns.rcode.REFUSED, r
    r, _ = q(IPP2, T.PTR)
    assert r.rcode() == dns.rcode.REFUSED, r
    _r, got = browse_until(IPP1, [P1], port=PORT)
    assert P1 in got

    assert soa_ok(L.ZONE1), "lab1 not answered right before SIGHUP"
    p.hup(config(LINK1, LINK2))
    assert soa_ok(L.ZONE1), "lab1 not answered right after SIGHUP"
    assert p.proc.poll() is None and p.proc.pid == p.pid
    assert soa_ok(L.ZONE2), "lab2 not served after the reload"
    _r, got = browse_until(IPP2, [P2], port=PORT)
    assert P2 in got, "lab2 browse after the reload: %s" % got
    r, _ = q(P2, T.SRV)
    assert r.rcode() == dns.rcode.NOERROR and rrset(r, P2, T.SRV) is not None, r
    r, dt = q(IPP1, T.PTR)
    assert P1 in ptr_targets(r, IPP1) and dt < 1.0, "link 1 cache lost on reload (%.2fs)" % dt
    zones = {lk["zone"] for lk in api()["links"]}
    assert zones == {L.ZONE1, L.ZONE2}, zones
    # the DNS listener kept working: it never needed to be re-bound
    assert "listen and admin addresses change only on restart" not in p.log()


def _assert_empty_fast(qname, rdtype):
    r, dt = q(qname, rdtype, timeout=5)
    assert r.rcode() == dns.rcode.NOERROR, "%s %s: %s" % (qname, T.to_text(rdtype), r)
    assert not r.answer, "%s %s answered with data: %s" % (qname, T.to_text(rdtype), r.answer)
    assert dt < 1.0, "%s %s took %.2fs (a filtered type must be answered at once)" % (
        qname, T.to_text(rdtype), dt)


def test_service_filters_deny_and_allow(lab, start):
    """config `links[].services: {allow, deny}`: a denied type is answered at once with
    NOERROR/no data (browse, subtype browse, resolve: SRV and TXT of its instances), and
    `_services._dns-sd._udp` (RFC 6763 §9) no longer lists it; other types are unaffected.
    With `allow: [_http._tcp]` only that type is shared. Applied by SIGHUP."""
    p = start(config(LINK1))
    _r, got = browse_until(IPP1, [P1], port=PORT)
    assert P1 in got
    _r, types = browse_until(SVCS1, [IPP1, HTTP1], port=PORT, timeout=8)
    assert {IPP1, HTTP1} <= types, types

    deny = LINK1 + "    services:\n      deny: [_ipp._tcp]\n"
    p.hup(config(deny))
    _assert_empty_fast(IPP1, T.PTR)
    _assert_empty_fast(SUB1, T.PTR)
    _assert_empty_fast(P1, T.SRV)
    _assert_empty_fast(P1, T.TXT)
    r, _ = q(SVCS1, T.PTR, timeout=8)
    types = ptr_targets(r, SVCS1)
    assert IPP1 not in types, "_services._dns-sd._udp still lists the denied _ipp._tcp: %s" % types
    assert HTTP1 in types, "an allowed type vanished from _services._dns-sd._udp: %s" % types
    _r, got = browse_until(HTTP1, [WEB1], port=PORT)
    assert WEB1 in got, got

    allow = LINK1 + "    services:\n      allow: [_http._tcp]\n"
    p.hup(config(allow))
    _assert_empty_fast(IPP1, T.PTR)
    _assert_empty_fast(P1, T.SRV)
    _assert_empty_fast(name("_notxt", "_tcp"), T.PTR)
    r, _ = q(SVCS1, T.PTR, timeout=8)
    types = ptr_targets(r, SVCS1)
    assert types == {HTTP1}, "with allow [_http._tcp], _services lists %s" % sorted(map(str, types))
    _r, got = browse_until(HTTP1, [WEB1], port=PORT)
    assert WEB1 in got, got
    r, _ = q(WEB1, T.SRV)
    srv = rrset(r, WEB1, T.SRV)
    assert srv is not None and srv[0].port == 80, r

    # back to open: _ipp._tcp is shared again
    p.hup(config(LINK1))
    _r, got = browse_until(IPP1, [P1], port=PORT)
    assert P1 in got, got


BROKEN = config(LINK1, "  - interface: nosuch0\n    domain: lab9.example.\n")


def test_invalid_reload_keeps_running_configuration(lab, start):
    """Issue "reload": an invalid new configuration (unknown interface) is rejected, the
    reasons logged as `reload rejected, keeping the running configuration: ...`, and the
    old configuration keeps serving. POST /reload with the broken file answers 400 with the
    error line (key and bad value); once the file is fixed, POST /reload answers 200."""
    p = start(config(LINK1, LINK2))
    _r, got = browse_until(IPP2, [P2], port=PORT)
    assert P2 in got

    p.hup(BROKEN, marker="reload rejected")
    log = p.log()
    lines = [ln for ln in log.splitlines() if "reload rejected" in ln]
    assert any("nosuch0" in ln for ln in lines), "the rejection does not name the problem:\n%s" % lines
    assert "keeping the running configuration" in lines[-1], lines[-1]
    assert p.proc.poll() is None and p.proc.pid == p.pid
    assert soa_ok(L.ZONE1) and soa_ok(L.ZONE2), "the old configuration is not served any more"
    r, dt = q(IPP2, T.PTR)
    assert P2 in ptr_targets(r, IPP2), r
    r, _ = q("lab9.example.", T.SOA)
    assert r.rcode() == dns.rcode.REFUSED, "half of the broken configuration was applied: %s" % r

    status, body = admin_http("POST", "/reload")
    assert status == 400, (status, body)
    errors = [ln for ln in body.splitlines() if ln.strip()]
    assert errors and any("nosuch0" in ln and "links[1].interface" in ln for ln in errors), body
    assert "reloaded" not in body
    assert soa_ok(L.ZONE2)

    p.write(config(LINK1))
    status, body = admin_http("POST", "/reload")
    assert (status, body) == (200, "reloaded\n"), (status, body)
    r, _ = q(L.ZONE2, T.SOA)
    assert r.rcode() == dns.rcode.REFUSED, "link 2 still served after it was removed: %s" % r
    assert soa_ok(L.ZONE1)
    links = [(lk["interface"], lk["zone"]) for lk in api()["links"]]
    assert links == [(L.R_IF1, L.ZONE1)], "/api/services after removing link 2: %s" % links


def _query_from(src, dst, qname, rdtype, tcp=False):
    """One query from source address `src` (inside dpt-r) to `dst`:PORT."""
    msg = make_query(qname, rdtype)
    with L.netns(L.NS_R):
        if tcp:
            return dns.query.tcp(msg, dst, port=PORT, timeout=5, source=src)
        return dns.query.udp(msg, dst, port=PORT, timeout=5, source=src)


def test_client_acl(lab, start):
    """config `allow-clients` (RFC 8766 §9.2, "only the site's own clients"): with
    `[192.0.2.0/24]` a query from 127.0.0.1 (UDP and TCP) gets REFUSED and moves
    proxy.aclRefused in /api/services and dns_acl_refused_total on /metrics by exactly one
    each, while a client in 192.0.2.0/24 is answered; after a SIGHUP with 127.0.0.0/8 allowed
    loopback is answered; with no `allow-clients` the default (loopback + the host's
    subnets) answers loopback too."""
    acl = "allow-clients: [192.0.2.0/24]\n"
    p = start(config(LINK1, extra=acl), listen=["%s:%d" % (L.R_V4_1, PORT)])
    a0, m0 = api()["proxy"]["aclRefused"], metric_value("dns_acl_refused_total")
    r, _ = q(L.ZONE1, T.SOA)
    assert r.rcode() == dns.rcode.REFUSED and not r.answer, r
    a1, m1 = api()["proxy"]["aclRefused"], metric_value("dns_acl_refused_total")
    assert a1 - a0 == 1, "proxy.aclRefused %d -> %d" % (a0, a1)
    assert m1 - m0 == 1, "dns_acl_refused_total %s -> %s" % (m0, m1)
    r, _ = q(IPP1, T.PTR, tcp=True)
    assert r.rcode() == dns.rcode.REFUSED, r
    assert api()["proxy"]["aclRefused"] == a1 + 1

    r = _query_from(L.R_V4_1, L.R_V4_1, L.ZONE1, T.SOA)
    assert r.rcode() == dns.rcode.NOERROR and rrset(r, L.ZONE1, T.SOA) is not None, r
    r = _query_from(L.R_V4_1, L.R_V4_1, IPP1, T.PTR)
    assert P1 in ptr_targets(r, IPP1) or r.rcode() == dns.rcode.NOERROR, r
    assert api()["proxy"]["aclRefused"] == a1 + 1, "an allowed client was counted as refused"

    p.hup(config(LINK1, extra="allow-clients: [192.0.2.0/24, 127.0.0.0/8]\n"))
    assert soa_ok(L.ZONE1), "loopback refused although 127.0.0.0/8 is allowed"
    _r, got = browse_until(IPP1, [P1], port=PORT)
    assert P1 in got

    p.hup(config(LINK1, extra="allow-clients: [198.51.100.0/24]\n"))
    r, _ = q(L.ZONE1, T.SOA)
    assert r.rcode() == dns.rcode.REFUSED, "the narrowed ACL was not applied by SIGHUP: %s" % r
    r = _query_from(L.R_V4_1, L.R_V4_1, L.ZONE1, T.SOA)
    assert r.rcode() == dns.rcode.REFUSED, r

    p.hup(config(LINK1))
    assert soa_ok(L.ZONE1), "the default ACL refuses loopback"
    r = _query_from(L.R_V4_1, L.R_V4_1, L.ZONE1, T.SOA)
    assert r.rcode() == dns.rcode.NOERROR, "the default ACL refuses the link's own subnet: %s" % r


def test_default_acl_answers_loopback(lab, start):
    """config `allow-clients` default (loopback plus the host's own subnets): a fresh proxy
    with no allow-clients answers 127.0.0.1 and ::1 and counts no ACL refusal."""
    start(config(LINK1), listen=["[::1]:%d" % PORT])
    assert soa_ok(L.ZONE1)
    r, _ = query(L.ZONE1, T.SOA, port=PORT, v6=True)
    assert r.rcode() == dns.rcode.NOERROR, r
    assert api()["proxy"]["aclRefused"] == 0
    assert metric_value("dns_acl_refused_total") == 0


def test_sighup_renames_zone(lab, start):
    """Issue "reload": a link whose zone changes is served under the new zone only; what was
    cached for the old zone is released (its RDATA named the old zone), so a browse in the
    new zone lists instances in the new zone and the old zone is REFUSED (RFC 8766 §5.1)."""
    p = start(config(LINK1, LINK2))
    _r, got = browse_until(IPP2, [P2], port=PORT)
    assert P2 in got
    zone_b = dns.name.from_text("lab2b.example.")
    ipp_b = name("_ipp", "_tcp", zone=zone_b)
    p2_b = name("Printer Two", "_ipp", "_tcp", zone=zone_b)
    p.hup(config(LINK1, "  - interface: %s\n    domain: lab2b.example.\n" % L.R_IF2))
    r, _ = q(L.ZONE2, T.SOA)
    assert r.rcode() == dns.rcode.REFUSED, "the old zone is still served: %s" % r
    assert soa_ok(zone_b)
    r, _got = browse_until(ipp_b, [p2_b], port=PORT)
    targets = ptr_targets(r, ipp_b)
    assert p2_b in targets, r
    assert all(t.is_subdomain(zone_b) for t in targets), "old-zone names leaked: %s" % targets
    r, _ = q(p2_b, T.SRV)
    srv = rrset(r, p2_b, T.SRV)
    assert srv is not None and srv[0].target.is_subdomain(zone_b), r
    zones = sorted(lk["zone"] for lk in api()["links"])
    assert zones == sorted([L.ZONE1, "lab2b.example."]), zones


def _tcp_connections(n):
    """n TCP connections to the proxy from the router namespace, each with one SOA query
    sent; returns the sockets."""
    socks = []
    with L.netns(L.NS_R):
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", PORT), timeout=3)
            wire = make_query(L.ZONE1, T.SOA).to_wire()
            s.sendall(len(wire).to_bytes(2, "big") + wire)
            socks.append(s)
    return socks


def _answered(s):
    """Whether a connection got an answer (rather than being closed by the server)."""
    try:
        head = s.recv(2)
    except (ConnectionResetError, socket.timeout):
        return False
    return len(head) == 2


def _udp_answers(count, timeout=0.5):
    """Sends `count` SOA queries at once over UDP from one socket; returns how many were
    answered (truncated slips count too)."""
    got = 0
    with L.netns(L.NS_R):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.settimeout(timeout)
        for i in range(count):
            m = make_query(L.ZONE1, T.SOA)
            m.id = i + 1
            s.sendto(m.to_wire(), ("127.0.0.1", PORT))
        while True:
            try:
                s.recvfrom(4096)
                got += 1
            except socket.timeout:
                return got
    finally:
        s.close()


def test_reload_applies_live_settings(lab, start):
    """Issue 43: a reload applies what it is told, live, and names what waits for a restart.
    SIGHUP with `tcp.max-connections-per-client: 2`, a UDP rate limit and `log-level: debug`:
    a third TCP connection from the same client is closed unanswered, a burst of 20 UDP
    queries gets no more than the limit lets out, debug lines appear. `push.listen` in the
    same file is not applied: the reload logs it as waiting for a restart, POST /reload says
    so in its response, and no DNS Push service is advertised for a port nobody listens on.
    Reloading the first file again lifts every limit."""
    base = "links:\n" + LINK1 + "server-name: %s\nlog-level: info\n" % L.SERVER_NAME
    p = start(base)
    push_srv = name("_dns-push-tls", "_tcp")
    before_push, _ = q(push_srv, T.SRV, tcp=True)  # TCP: the rate limit below is UDP only
    socks = _tcp_connections(3)
    assert all(_answered(s) for s in socks), "3 connections answered before the reload"
    for s in socks:
        s.close()
    assert _udp_answers(20) == 20, "no rate limit before the reload"

    limited = base.replace("log-level: info\n", "log-level: debug\n") + (
        "tcp:\n  max-connections-per-client: 2\n"
        "rate-limit:\n  responses-per-second: 1\n  burst: 2\n  slip: 0\n"
        "push:\n  listen: [\"127.0.0.1:8999\"]\n")
    debug_before = p.log().count(" debug ")
    p.hup(limited)
    log = p.log()
    assert "reload: push.listen changed; it takes effect on restart only (the DNS Push sockets are bound at start)" in log, log[-2000:]
    socks = _tcp_connections(3)
    answered = [_answered(s) for s in socks]
    for s in socks:
        s.close()
    assert answered == [True, True, False], "tcp.max-connections-per-client: 2 after the reload: %s" % answered
    got = _udp_answers(20)
    assert 1 <= got <= 4, "rate-limit 1/s, burst 2 after the reload: %d of 20 answered" % got
    assert p.log().count(" debug ") > debug_before, "log-level: debug after the reload"
    after_push, _ = q(push_srv, T.SRV, tcp=True)
    assert after_push.rcode() == before_push.rcode() and after_push.answer == before_push.answer, \
        "push.listen waits for a restart: nothing new advertised\n%s\n%s" % (before_push, after_push)

    status, body = admin_http("POST", "/reload")
    assert status == 200 and body == (
        "reloaded\npush.listen: changed, takes effect on restart only (the DNS Push sockets are bound at start)\n"), (status, body)

    p.hup(base)
    time.sleep(1.5)  # the rate limit's bucket is gone with it; this only lets UDP settle
    socks = _tcp_connections(3)
    assert all(_answered(s) for s in socks), "the connection limit is lifted by the next reload"
    for s in socks:
        s.close()
    assert _udp_answers(20) == 20, "the rate limit is lifted by the next reload"
    status, body = admin_http("POST", "/reload")
    assert (status, body) == (200, "reloaded\n"), (status, body)
