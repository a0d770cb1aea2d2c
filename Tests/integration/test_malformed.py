"""Malformed queries: FORMERR with a readable header, or dropped, and the
server keeps answering (RFC 1035 §4.1.1; RFC 6891 §7; RFC 7766 §8)."""

import struct

import dns.message
import dns.rcode
import dns.rdatatype as T
import pytest

from helpers import ZONE1, make_query, query, rrset, tcp_connect, tcp_recv, tcp_send, udp_raw, wait_closed

QID = 0x4242


def hdr(qd=1, an=0, ns=0, ar=0, flags=0x0000, qid=QID):
    return struct.pack(">HHHHHH", qid, flags, qd, an, ns, ar)


QTAIL = struct.pack(">HH", 6, 1)  # SOA IN
ZONE_WIRE = b"\x04lab1\x07example\x00"

MALFORMED = {
    "short-header": b"\x42\x42\x00",
    "empty": b"",
    "no-question": hdr(qd=0),
    "truncated-name": hdr() + b"\x04lab1\x07exa",
    "missing-qtype": hdr() + ZONE_WIRE,
    "label-too-long": hdr() + b"\x40" + b"a" * 64 + b"\x00" + QTAIL,
    "pointer-loop": hdr() + b"\xc0\x0c" + QTAIL,
    "forward-pointer": hdr() + b"\xc0\x20" + QTAIL + b"\x00" * 16,
    "bad-label-type": hdr() + b"\x80abc\x00" + QTAIL,
    "counts-overflow": hdr(an=5, ar=3) + ZONE_WIRE + QTAIL,
    "opt-bad-rdlen": hdr(ar=1) + ZONE_WIRE + QTAIL + b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x40",
}


def assert_still_answering():
    r, _ = query(ZONE1, T.SOA, timeout=5)
    assert rrset(r, ZONE1, T.SOA) is not None


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_udp(lab, case):
    """A malformed query gets FORMERR with the ID echoed (when the header is
    readable) or no reply at all; never a crash, never a positive answer."""
    wire = MALFORMED[case]
    reply = udp_raw(wire, timeout=2)
    if reply is not None:
        assert len(wire) >= 12, "a reply to a message without a readable header"
        assert len(reply) >= 12
        qid, flags = struct.unpack(">HH", reply[:4])
        assert qid == QID, "ID not echoed"
        assert flags & 0x8000, "QR not set in the reply"
        assert (flags & 0x0F) == dns.rcode.FORMERR, "rcode %d, want FORMERR (1)" % (flags & 0x0F)
    assert_still_answering()


def test_response_packets_not_answered(lab):
    """A message with QR=1 (a response) is never answered (avoids loops)."""
    q = make_query(ZONE1, T.SOA)
    wire = bytearray(q.to_wire())
    wire[2] |= 0x80
    assert udp_raw(bytes(wire), timeout=2) is None
    assert_still_answering()


def test_unknown_opcode_notimp(lab):
    """RFC 1035 §4.1.1: an opcode the server does not implement gets NOTIMP
    (opcode 3 is unassigned)."""
    q = make_query(ZONE1, T.SOA)
    wire = bytearray(q.to_wire())
    wire[2] = (wire[2] & 0x87) | (3 << 3)
    reply = udp_raw(bytes(wire), timeout=3)
    assert reply is not None, "no reply to an unknown opcode"
    assert struct.unpack(">H", reply[:2])[0] == q.id
    assert (reply[3] & 0x0F) == dns.rcode.NOTIMP
    assert_still_answering()


@pytest.mark.parametrize("case", ["truncated-name", "pointer-loop", "label-too-long"])
def test_malformed_tcp(lab, case):
    """Over TCP a malformed message gets FORMERR or the connection is closed;
    the server keeps accepting connections."""
    s = tcp_connect(timeout=5)
    try:
        tcp_send(s, MALFORMED[case])
        try:
            reply = tcp_recv(s, 5)
        except (ConnectionError, OSError):
            reply = None
        if reply is not None:
            assert struct.unpack(">H", reply[:2])[0] == QID
            assert (reply[3] & 0x0F) == dns.rcode.FORMERR
    finally:
        s.close()
    r, _ = query(ZONE1, T.SOA, tcp=True, timeout=5)
    assert rrset(r, ZONE1, T.SOA) is not None


def test_garbage_length_prefix_tcp(lab):
    """RFC 7766 §8: a length prefix followed by too few bytes then EOF does not
    hurt the server."""
    s = tcp_connect(timeout=5)
    s.sendall(struct.pack(">H", 500) + b"\x00" * 20)
    s.close()
    s = tcp_connect(timeout=5)
    try:
        s.sendall(struct.pack(">H", 0))  # zero-length message
        wait_closed(s, 2)
    finally:
        s.close()
    assert_still_answering()
    r, _ = query(ZONE1, T.SOA, tcp=True, timeout=5)
    assert rrset(r, ZONE1, T.SOA) is not None
