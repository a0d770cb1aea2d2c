"""DNS Push Notifications (RFC 8765) over DSO (RFC 8490), on TLS and plain TCP.

A second proxy instance in dpt-r serves Push on 127.0.0.1:8853 (TLS) with a
self-signed certificate it creates in the lab's state directory, a short
inactivity timeout (2 s: sessions without subscriptions end after 5 s), and
small limits so that they can be reached."""

import hashlib
import os
import re
import socket
import ssl
import struct
import time

import dns.message
import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
import dso
from dso import Client, message, subscribe_tlv, tlv, unsubscribe_tlv, reconfirm_tlv
from helpers import name, query, unique

DNS_PORT, TLS_PORT = 5310, 8853
MAX_SESSIONS, MAX_SUBS = 8, 4
IPP1 = name("_ipp", "_tcp")


@pytest.fixture(scope="module")
def push(lab):
    state = os.path.join(lab.dir, "push-state")
    config = os.path.join(lab.dir, "push.yaml")
    with open(config, "w") as f:
        # on-tcp: cleartext DSO on the plain TCP listener too (off by default, a lab setting).
        f.write("push:\n  on-tcp: true\n  inactivity-timeout: 2\n  max-sessions: %d\n  max-subscriptions-per-session: %d\n"
                % (MAX_SESSIONS, MAX_SUBS))
    lab.start_proxy(["--config", config, "--push-listen", "%s:%d" % (L.PROXY_ADDR, TLS_PORT),
                     "--state-dir", state], name="push", port=DNS_PORT, v6=False)
    yield {"state": state, "cert": os.path.join(state, "push-tls-cert.pem")}
    if os.environ.get("DPT_DUMP_PUSH_LOG"):
        lab.dump_logs(["push"], tail=100000)
    lab.stop_proc("push")


def tls(push, **kw):
    return Client(TLS_PORT, cafile=push["cert"], server_hostname="ns.example", **kw)


def subscribe(c, mid, qname, rdtype, rdclass=1):
    r = c.request(message(mid, subscribe_tlv(qname, rdtype, rdclass)))
    assert r.qr and r.id == mid
    return r


def test_certificate_kept_and_fingerprint_logged(lab, push):
    """Self-signed certificate: verifies against the kept PEM for the server name, and the
    SHA-256 fingerprint in the log matches the certificate served."""
    c = tls(push)
    try:
        der = c.sock.getpeercert(binary_form=True)
    finally:
        c.close()
    fp = ":".join("%02X" % b for b in hashlib.sha256(der).digest())
    assert fp in lab.log_text("push", 100000)
    assert oct(os.stat(os.path.join(push["state"], "push-tls-key.pem")).st_mode & 0o777) == "0o600"


def test_keepalive_establishes_session(push):
    """RFC 8490 §7.1: Keepalive request → NOERROR with exactly one Keepalive TLV, server values."""
    c = tls(push)
    try:
        r = c.request(message(7, dso.keepalive_tlv(1000, 1000) + tlv(dso.PADDING, b"\0" * 5)))
        assert r.qr and r.id == 7 and r.rcode == dso.NOERROR and r.opcode == 6
        kas = [d for t, d in r.tlvs if t == dso.KEEPALIVE]
        assert len(kas) == 1
        inactivity, keepalive = struct.unpack(">II", kas[0])
        assert inactivity == 2000 and keepalive >= 10000
        assert r.tlv(dso.PADDING) is not None, "padded request, unpadded response (§7.3)"
    finally:
        c.close()


def test_subscribe_then_push_with_known_records(push):
    """RFC 8765 §6.2: NOERROR at once, then a PUSH with what is known: translated names, mDNS TTL 4500."""
    c = tls(push)
    try:
        r = subscribe(c, 11, IPP1, T.PTR)
        assert r.rcode == dso.NOERROR and r.tlv(dso.SUBSCRIBE) is None
        want = name("Printer One", "_ipp", "_tcp")
        (n, t, cl, ttl, rd), _dt = c.push_changes(10, lambda ch: ch[4] is not None and ch[4].target == want)
        assert n == IPP1 and t == T.PTR and cl == 1 and ttl == 4500
    finally:
        c.close()


def test_far_link_change_arrives_as_push(lab, push):
    """A service published, then withdrawn, on link 1 reaches the subscriber as an add
    (TTL 4500) and a single-record removal (TTL 0xFFFFFFFF)."""
    stype = "_pushtest%s._tcp" % unique("")[-4:]
    tname = name(stype.split(".")[0], "_tcp")
    c = tls(push)
    try:
        assert subscribe(c, 12, tname, T.PTR).rcode == dso.NOERROR
        inst = name("Push Test", stype.split(".")[0], "_tcp")
        time.sleep(1.0)  # the browse is running before the service appears
        paths = lab.add_far_services("avahi-l1", [("Push Test", stype, 7000, [], [b"x=1"])], prefix="push")
        try:
            ch, dt_add = c.push_changes(15, lambda ch: ch[4] is not None and ch[4].target == inst)
            assert ch[3] == 4500
        finally:
            lab.remove_far_services(paths)
        ch, dt_del = c.push_changes(15, lambda ch: ch[3] == dso.REMOVE_ONE and ch[4].target == inst)
        print("add after %.3fs, removal after %.3fs" % (dt_add, dt_del))
        assert dt_del < 5.0
    finally:
        c.close()


def test_tls_record_boundaries(push):
    """Length prefix and message in separate records, byte by byte, and two messages in one
    record: every request is answered, in order."""
    c = tls(push)
    try:
        m1 = message(21, dso.keepalive_tlv())
        c.send_raw(struct.pack(">H", len(m1)))  # prefix alone
        c.send_raw(m1)
        assert c.recv().id == 21
        m2 = message(22, dso.keepalive_tlv())
        framed = struct.pack(">H", len(m2)) + m2
        for i in range(len(framed)):  # one record per byte
            c.send_raw(framed[i:i + 1])
        assert c.recv().id == 22
        m3, m4 = message(23, dso.keepalive_tlv()), message(24, dso.keepalive_tlv())
        c.send_raw(struct.pack(">H", len(m3)) + m3 + struct.pack(">H", len(m4)) + m4)  # coalesced
        assert [c.recv().id, c.recv().id] == [23, 24]
    finally:
        c.close()


def test_duplicate_subscribe_is_fatal(push):
    """RFC 8765 §6.2: a second SUBSCRIBE for the same name/type/class (any case) aborts."""
    c = tls(push)
    try:
        assert subscribe(c, 31, IPP1, T.PTR).rcode == dso.NOERROR
        c.send(message(32, subscribe_tlv(str(IPP1).upper(), T.PTR)))
        assert c.closed_within(5) is not None
    finally:
        c.close()


def test_unknown_tlv_gets_dsotypeni(push):
    """RFC 8490 §5.1.1: unknown primary TLV in a request → DSOTYPENI, TLV not echoed."""
    c = tls(push)
    try:
        r = c.request(message(41, tlv(0xF900, b"abc")))
        assert r.rcode == dso.DSOTYPENI and r.tlvs == []
        assert c.request(message(42, dso.keepalive_tlv())).rcode == dso.NOERROR  # session goes on
    finally:
        c.close()


def test_notauth_outside_zones_and_formerr(push):
    """RFC 8765 §6.2.2: a name outside the zones → NOTAUTH with a Retry Delay; RFC 8490 §5.4:
    a DSO message with QDCOUNT=1 → FORMERR."""
    c = tls(push)
    try:
        r = subscribe(c, 51, "printer.example.org.", T.PTR)
        assert r.rcode == dso.NOTAUTH and r.tlv(dso.RETRY_DELAY) is not None
        r = c.request(message(52, dso.keepalive_tlv(), counts=(1, 0, 0, 0)))
        assert r.rcode == dso.FORMERR
    finally:
        c.close()


def test_retry_delay_from_client_is_fatal(push):
    c = tls(push)
    try:
        c.establish()
        c.send(message(61, tlv(dso.RETRY_DELAY, struct.pack(">I", 1000))))
        assert c.closed_within(5) is not None
    finally:
        c.close()


def test_idle_session_aborted(push):
    """RFC 8490 §6.4.1: no subscription, no traffic → aborted after max(5 s, 2 × 2 s)."""
    c = tls(push)
    try:
        c.establish()
        dt = c.closed_within(15)
        assert dt is not None and 4.0 <= dt <= 9.0, dt
    finally:
        c.close()


def test_subscribed_session_not_idle_and_unsubscribe(lab, push):
    """A session with a subscription outlives the inactivity limit; after UNSUBSCRIBE
    (and an unknown ID, ignored) no PUSH arrives for a new service."""
    stype = "_unsub%s" % unique("")[-4:]
    c = tls(push)
    try:
        assert subscribe(c, 71, name(stype, "_tcp"), T.PTR).rcode == dso.NOERROR
        assert c.closed_within(7) is None, "a subscribed session was treated as idle"
        c.send(message(0, unsubscribe_tlv(71)))
        c.send(message(0, unsubscribe_tlv(999)))
        paths = lab.add_far_services("avahi-l1", [("Unsub Test", stype + "._tcp", 7001, [], [])], prefix="unsub")
        try:
            with pytest.raises(TimeoutError):
                c.recv(3)
        finally:
            lab.remove_far_services(paths)
        assert c.request(message(72, dso.keepalive_tlv())).rcode == dso.NOERROR
    finally:
        c.close()


def test_reconfirm_of_unknown_record_pushes_removal(push):
    """RFC 8765 §6.5: RECONFIRM of a record the proxy does not hold → removal PUSH."""
    c = tls(push)
    try:
        assert subscribe(c, 81, IPP1, T.PTR).rcode == dso.NOERROR
        c.push_changes(10)  # the initial PUSH
        ghost = name("Ghost %s" % unique(""), "_ipp", "_tcp")
        c.send(message(0, reconfirm_tlv(IPP1, T.PTR, ghost.to_wire())))
        ch, _ = c.push_changes(5, lambda ch: ch[3] == dso.REMOVE_ONE)
        assert ch[0] == IPP1 and ch[4].target == ghost
    finally:
        c.close()


def test_unusable_srv_target_withheld_over_push(lab, push):
    """RFC 8766 §5.5.2 on DNS Push, as on unicast answers (test_browse_resolve.py::
    test_srv_to_link_local_only_host_left_out): an instance on a host with only link-local
    addresses is pushed while its addresses are unknown, then removed (PTR and SRV) once the
    target's A and AAAA browses, which this client subscribes to, have answered."""
    import json
    stype = "_llpush%s" % unique("")[-4:]
    svc = {"name": "LL Push", "type": stype + "._tcp", "port": 631, "txt": ["ll=1"], "host": L.LL_HOST}
    key = lab.responder_cmd("publish " + json.dumps(svc)).split(" ", 2)[2].strip()
    browse, inst = name(stype, "_tcp"), name("LL Push", stype, "_tcp")
    c = tls(push)
    try:
        assert subscribe(c, 21, browse, T.PTR).rcode == dso.NOERROR
        c.push_changes(10, lambda ch: ch[3] != dso.REMOVE_ONE and ch[4] is not None and ch[4].target == inst)
        assert subscribe(c, 22, inst, T.SRV).rcode == dso.NOERROR
        c.push_changes(10, lambda ch: ch[1] == T.SRV and ch[3] != dso.REMOVE_ONE)
        removed = set()
        for mid, rdtype in ((23, T.A), (24, T.AAAA)):
            r = c.request(message(mid, subscribe_tlv(name(L.LL_HOST), rdtype)))
            while not r.qr:  # PUSHes may come before the response
                removed |= {ch[1] for ch in r.changes() if ch[3] == dso.REMOVE_ONE}
                r = c.recv()
            assert r.rcode == dso.NOERROR
        deadline = time.monotonic() + 10
        while removed != {T.PTR, T.SRV} and time.monotonic() < deadline:
            # one PUSH carries the changes of every subscription of the session
            for ch in c.recv(max(0.1, deadline - time.monotonic())).changes():
                if ch[3] == dso.REMOVE_ONE:
                    assert ch[0] in (browse, inst), ch
                    removed.add(ch[1])
        assert removed == {T.PTR, T.SRV}
    finally:
        c.close()
        lab.responder_cmd("unpublish " + key)


def test_type_any_subscription(push):
    """RFC 8765 §6.2: TYPE 255 means every type at the name: SRV and TXT of an instance."""
    c = tls(push)
    try:
        inst = name("Printer One", "_ipp", "_tcp")
        assert subscribe(c, 91, inst, 255).rcode == dso.NOERROR
        seen = set()
        deadline = time.monotonic() + 10
        while not {T.SRV, T.TXT} <= seen and time.monotonic() < deadline:
            for n, t, _c, ttl, _rd in c.recv(max(0.1, deadline - time.monotonic())).changes():
                assert n == inst
                seen.add(t)
        assert {T.SRV, T.TXT} <= seen
    finally:
        c.close()


def test_subscription_and_session_limits(push):
    """Beyond the limits: REFUSED with a Retry Delay, never a crash."""
    c = tls(push)
    extra = []
    try:
        for i in range(MAX_SUBS):
            assert subscribe(c, 100 + i, name("_lim%d" % i, "_tcp"), T.PTR).rcode == dso.NOERROR
        r = subscribe(c, 120, name("_limx", "_tcp"), T.PTR)
        assert r.rcode == dso.REFUSED and r.tlv(dso.RETRY_DELAY) is not None
        for _ in range(MAX_SESSIONS - 1):
            e = tls(push)
            e.establish()
            extra.append(e)
        last = tls(push)
        extra.append(last)
        r = last.request(message(5, dso.keepalive_tlv()))
        assert r.rcode == dso.REFUSED and r.tlv(dso.RETRY_DELAY) is not None
    finally:
        for e in extra:
            e.close()
        c.close()


def test_plain_tcp_dso_and_udp_notimp(push):
    """DSO also on the plain TCP listener when push.on-tcp is set; never over UDP (RFC 8490
    §5.1: NOTIMP)."""
    c = Client(DNS_PORT, tls=False)
    try:
        assert c.request(message(3, dso.keepalive_tlv())).rcode == dso.NOERROR
    finally:
        c.close()
    with L.netns(L.NS_R):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.settimeout(5)
        s.sendto(message(4, dso.keepalive_tlv()), (L.PROXY_ADDR, DNS_PORT))
        data, _ = s.recvfrom(4096)
    finally:
        s.close()
    assert data[3] & 0xF == dso.NOTIMP


def test_cleartext_dso_off_by_default(lab):
    """RFC 8765 §4: Push runs over TLS. With default settings (the session proxy) a DSO
    request on the plain TCP listener gets NOTIMP (RFC 8490 §5.1: no session is offered
    there), and the connection still answers ordinary queries."""
    from helpers import make_query
    c = Client(L.PROXY_PORT, tls=False)
    try:
        r = c.request(message(3, dso.keepalive_tlv()))
        assert r.qr and r.id == 3 and r.rcode == dso.NOTIMP and not r.tlvs
        c.send(make_query(name("_ipp", "_tcp"), T.PTR).to_wire())
        assert dns.message.from_wire(c.recv().wire).rcode() == dns.rcode.NOERROR
    finally:
        c.close()


def test_push_service_advertised(push):
    """RFC 8766 §6.4: _dns-push-tls._tcp SRV names the server and the real TLS port; the
    server name resolves to the listen address."""
    r, _ = query(name("_dns-push-tls", "_tcp"), T.SRV, port=DNS_PORT)
    srv = [rd for rrset in r.answer for rd in rrset if rrset.rdtype == T.SRV]
    assert srv and srv[0].port == TLS_PORT and str(srv[0].target) == L.SERVER_NAME
    r, _ = query(L.SERVER_NAME, T.A, port=DNS_PORT, check=False)
    assert [rd.address for rrset in r.answer for rd in rrset] == [L.PROXY_ADDR]


def test_push_metrics_exported(push):
    """Sessions, subscriptions, pushes and bytes sent, sessions ended by reason."""
    import urllib.request
    with L.netns(L.NS_R):
        text = urllib.request.urlopen("http://%s:%d/metrics" % (L.PROXY_ADDR, DNS_PORT + 3000), timeout=5).read().decode()
    for metric in ("dns_push_sessions", "dns_push_subscriptions", "dns_push_messages_sent_total",
                   "dns_push_bytes_sent_total", 'dns_push_sessions_ended_total{reason="protocol_error"}'):
        assert metric in text, metric
    ended = [line for line in text.splitlines() if line.startswith('dns_push_sessions_ended_total{reason="inactivity"}')]
    assert ended and float(ended[0].split()[-1]) >= 1


def _watch(args, duration):
    import subprocess
    from test_cli_browse import cli_bin
    cmd = ["ip", "netns", "exec", L.NS_R, cli_bin()] + list(args) + ["--watch", "--duration", str(duration)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_cli_watch_uses_push(lab, push):
    """dnssd-browse --watch subscribes with DNS Push where the zone advertises it: a service
    published and withdrawn during the watch prints '+' then '-' without polling (TTL 10 s
    polls could not show both within 6 s)."""
    stype = "_cliw%s" % unique("")[-4:]
    p = _watch(["--server", "%s:%d" % (L.PROXY_ADDR, DNS_PORT), "--push-ca", push["cert"],
                stype + "._tcp", L.ZONE1], 9)
    time.sleep(1.5)
    paths = lab.add_far_services("avahi-l1", [("CLI Watch", stype + "._tcp", 7002, [], [])], prefix="cliw")
    time.sleep(2.5)
    lab.remove_far_services(paths)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert "warning" not in err, err
    lines = [l for l in out.splitlines() if "CLI Watch" in l]
    assert len(lines) == 2 and lines[0].startswith("+") and lines[1].startswith("-"), out


def test_cli_watch_falls_back_when_tls_fails(push):
    """An untrusted certificate: one warning line that says so and names --push-ca, then
    polling (still exit 0)."""
    p = _watch(["--server", "%s:%d" % (L.PROXY_ADDR, DNS_PORT), "_ipp._tcp", L.ZONE1], 3)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    warnings = [l for l in err.splitlines() if "warning" in l and "polling instead" in l]
    assert len(warnings) == 1, err
    assert "certificate is not trusted" in warnings[0] and "--push-ca" in warnings[0], warnings
    assert "Printer One" in out


def test_shutdown_sends_retry_delay(lab, push):
    """RFC 8490 §7.2: on SIGTERM an established session gets a unidirectional Retry Delay
    (RCODE NOERROR); §6.6.1: the client then has five seconds to close the connection
    before the server resets it."""
    lab.start_proxy(["--push-listen", "%s:%d" % (L.PROXY_ADDR, TLS_PORT + 1), "--state-dir", push["state"]],
                    name="push-stop", port=DNS_PORT + 1, v6=False)
    try:
        c = Client(TLS_PORT + 1, cafile=push["cert"])
        try:
            assert subscribe(c, 1, IPP1, T.PTR).rcode == dso.NOERROR
            lab.procs["push-stop"].send_signal(15)
            deadline = time.monotonic() + 10
            got = None
            while got is None and time.monotonic() < deadline:
                r = c.recv(max(0.1, deadline - time.monotonic()))
                if r.id == 0 and not r.qr and r.tlvs and r.tlvs[0][0] == dso.RETRY_DELAY:
                    got = r
            assert got is not None and got.rcode == dso.NOERROR
            waited = c.closed_within(10)
            assert waited is not None and 3.5 <= waited <= 7, waited
        finally:
            c.close()
    finally:
        lab.stop_proc("push-stop")


def test_edns_tcp_keepalive_inside_session_is_fatal(push):
    """RFC 8490 §7.1.2: once a DSO session exists, an EDNS(0) TCP keepalive option in a query
    on it is a fatal error; ordinary queries on it are answered."""
    import dns.edns
    from helpers import make_query
    c = Client(DNS_PORT, tls=False)
    try:
        c.establish()
        c.send(make_query(name("_ipp", "_tcp"), T.PTR).to_wire())
        assert dns.message.from_wire(c.recv().wire).rcode() == dns.rcode.NOERROR
        c.send(make_query(name("_ipp", "_tcp"), T.PTR, options=[dns.edns.GenericOption(11, b"")]).to_wire())
        assert c.closed_within(5) is not None
    finally:
        c.close()
