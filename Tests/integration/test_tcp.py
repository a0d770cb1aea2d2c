"""DNS over TCP (RFC 7766; RFC 1035 §4.2.2; RFC 7828)."""

import struct
import time

import dns.edns
import dns.message
import dns.rcode
import dns.rdatatype as T

import lab as L
from helpers import (ZONE1, assert_negative, dig, make_query, name, ptr_targets, query, rrset,
                     tcp_connect, tcp_recv, tcp_send, unique, wait_closed)

IPP1 = name("_ipp", "_tcp")
IDLE_BOUND = 40.0  # RFC 7766 §6.2.3: "on the order of seconds"; loose bound


def test_pipelined_out_of_order(lab):
    """RFC 7766 §6.2.1.1, §7: pipeline a query that takes the full 6 s mDNS wait,
    then a cached query on the same connection: the cached answer returns
    first, both answers arrive and the IDs match their questions."""
    query(IPP1, T.PTR)  # warm the cache
    slow = make_query(name(unique(), "_ipp", "_tcp"), T.SRV)
    fast = make_query(IPP1, T.PTR)
    fast.id = (slow.id + 1) & 0xFFFF
    s = tcp_connect(timeout=15)
    try:
        t0 = time.monotonic()
        tcp_send(s, slow.to_wire())
        tcp_send(s, fast.to_wire())
        first = dns.message.from_wire(tcp_recv(s, 12))
        t1 = time.monotonic() - t0
        second = dns.message.from_wire(tcp_recv(s, 12))
        t2 = time.monotonic() - t0
    finally:
        s.close()
    assert first.id == fast.id, "the cached answer did not come first (got ID %d at %.2fs)" % (first.id, t1)
    assert first.question[0].name == IPP1
    assert name("Printer One", "_ipp", "_tcp") in ptr_targets(first, IPP1)
    assert t1 < 3.0, "cached answer only after %.2fs" % t1
    assert second.id == slow.id and second.question == slow.question
    assert_negative(second)
    assert t2 >= 4.0


def test_several_queries_one_connection(lab):
    """RFC 7766 §6.2.1: several queries on one connection (dig +keepopen) are all answered."""
    d = dig("+tcp", "+keepopen", "SOA", L.ZONE1, "NS", L.ZONE1, "SOA", L.ZONE2)
    assert d.out.count("status: NOERROR") == 3, d.out


def test_drip_fed_query_answered(lab):
    """RFC 7766 §8 (MUST NOT close on a partial read): 1 length byte, wait 1 s,
    then the rest: the query is answered."""
    q = make_query(ZONE1, T.SOA)
    wire = q.to_wire()
    framed = struct.pack(">H", len(wire)) + wire
    s = tcp_connect()
    try:
        s.sendall(framed[:1])
        time.sleep(1.0)
        s.sendall(framed[1:7])
        time.sleep(0.5)
        s.sendall(framed[7:])
        r = dns.message.from_wire(tcp_recv(s, 10))
    finally:
        s.close()
    assert r.id == q.id and rrset(r, ZONE1, T.SOA) is not None


def test_idle_connection_closed(lab):
    """RFC 7766 §6.2.3: an idle connection is closed by the server after an
    idle timeout "on the order of seconds" (loose bound: %d s)."""
    s = tcp_connect()
    try:
        tcp_send(s, make_query(ZONE1, T.SOA).to_wire())
        tcp_recv(s, 10)
        dt = wait_closed(s, IDLE_BOUND)
    finally:
        s.close()
    assert dt is not None, "connection still open after %.0f s idle" % IDLE_BOUND


def test_slow_drip_does_not_keep_connection_open(lab):
    """RFC 7766 §6.2.3 (SHOULD reset the idle timer only on complete
    messages): one byte every 2 s never completes a message and the
    connection is closed at the idle timeout."""
    q = make_query(ZONE1, T.SOA).to_wire()
    junk = struct.pack(">H", 4000) + q * 200  # a 4000-byte message, sent 1 byte / 2 s
    s = tcp_connect()
    closed = False
    try:
        t0 = time.monotonic()
        i = 0
        while time.monotonic() - t0 < IDLE_BOUND + 20 and i < len(junk):
            try:
                s.sendall(junk[i:i + 1])
            except OSError:
                closed = True
                break
            i += 1
            if wait_closed(s, 2.0) is not None:
                closed = True
                break
    finally:
        s.close()
    assert closed, "a drip-feeding client kept the connection open for %.0f s" % (IDLE_BOUND + 20)


def test_tcp_negative_and_refused(lab):
    """RFC 7766 §5: TCP answers like UDP: a negative inside the zone and
    REFUSED outside."""
    r, _ = query(name(unique(), "_ipp", "_tcp"), T.SRV, tcp=True, timeout=12)
    assert_negative(r)
    r, _ = query("www.example.org.", T.A, tcp=True, check=False)
    assert r.rcode() == dns.rcode.REFUSED


def test_tcp_keepalive_option(lab):
    """RFC 7828 §3.2.1-3.3: edns-tcp-keepalive is ignored over UDP (never in a
    UDP reply); over TCP, if present in the reply, it carries a 2-byte timeout."""
    ka = dns.edns.GenericOption(11, b"")
    r, _ = query(ZONE1, T.SOA, options=[ka])
    assert r.rcode() == dns.rcode.NOERROR
    assert all(o.otype != 11 for o in r.options), "edns-tcp-keepalive in a UDP reply"
    r, _ = query(ZONE1, T.SOA, options=[ka], tcp=True)
    assert r.rcode() == dns.rcode.NOERROR
    for o in r.options:
        if o.otype == 11:
            assert len(o.to_wire()) == 2, "keepalive option without a timeout"
