#!/usr/bin/python3
"""A raw mDNS responder with hostile far-link data, for test_hostile.py (run inside dpt-l1).

python-zeroconf and avahi refuse to publish some of what a real network can carry (unknown
record types, names near 255 octets, a 9000-octet TXT), so this answers mDNS queries itself
from the fixed record table RECORDS: each question whose name (compared case-insensitively,
RFC 6762 §16) and type match gets one multicast response to 224.0.0.251:5353 (RFC 6762
§6). The wire format is written by hand, uncompressed, so every label octet is exactly as
listed. Prints "READY" once its socket is up; exits when stdin closes.
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import struct
import sys

PTR, TXT, SRV, A, ANY = 12, 16, 33, 1, 255
UNKNOWN_TYPE = 65280          # private use (RFC 6895 §3.1): a type nobody knows
IN, CACHE_FLUSH = 1, 0x8000
HOST = (b"hostile-host", b"local")
HOST_V4 = "192.0.2.30"
LOCAL = (b"local",)


def wire_name(labels) -> bytes:
    return b"".join(bytes([len(lb)]) + lb for lb in labels) + b"\x00"


def txt(strings) -> bytes:
    return b"".join(bytes([len(s)]) + s for s in strings)


# Instance labels that need escaping in presentation format (RFC 6763 §4.3: dots and
# backslashes inside a label; RFC 8766 §5.3: spaces are raw 0x20) or are long/unusual.
ESCAPE_INSTANCES = [
    b"Dot.ted\\Back slash",
    "\u00dcn\u00efc\u00f8d\u00e9 \u65e5\u672c\u8a9e \U0001F5A8".encode("utf-8"),
    b"L" + b"o" * 61 + b"g",                        # 63 octets: the most a label holds
    b"semi;colon \"quoted\" (paren) $at@",
    b"tab\there",
]
STYPE = (b"_hostile", b"_tcp")
# 9000-octet TXT RDATA (RFC 6763 §6.1 allows up to ~8900 in one mDNS packet; this is more,
# RFC 6762 §17 allows 9000-octet messages with IP fragmentation): 35 strings of 255 + 1 of 39.
HUGE_TXT_STRINGS = [(b"k%02d=" % i) + bytes([0x41 + i % 26]) * 251 for i in range(35)] + [b"tail=" + b"z" * 34]
HUGE_TXT = txt(HUGE_TXT_STRINGS)
assert len(HUGE_TXT) == 9000, len(HUGE_TXT)
# A name of 250 octets in .local becomes 257 under lab1.example. (7 octets longer): it cannot
# be written in the zone at all, so the proxy must drop it rather than crash or cut it.
LONG_INSTANCE = (b"a" * 63, b"b" * 63, b"c" * 63, b"d" * 39)
LONG_TYPE = (b"_long", b"_tcp")
assert len(wire_name(LONG_INSTANCE + LONG_TYPE + LOCAL)) == 250
# Unknown-type RDATA holding a .local name.
UNKNOWN_OWNER = (b"unknown-rr",) + LOCAL
UNKNOWN_RDATA = b"\x00\x07" + wire_name(HOST) + b"opaque"


def _records():
    recs = []  # (owner labels, type, cache-flush, rdata)

    def service(instance, stype, port, txt_rdata):
        full = (instance,) + stype + LOCAL
        recs.append((stype + LOCAL, PTR, False, wire_name(full)))
        recs.append((full, SRV, True, struct.pack(">HHH", 0, 0, port) + wire_name(HOST)))
        recs.append((full, TXT, True, txt_rdata))

    for i, inst in enumerate(ESCAPE_INSTANCES):
        service(inst, STYPE, 8000 + i, txt([b"i=%d" % i, b"label=" + inst[:200]]))
    service(b"Huge TXT", (b"_hugetxt", b"_tcp"), 8100, HUGE_TXT)
    recs.append((LONG_TYPE + LOCAL, PTR, False, wire_name(LONG_INSTANCE + LONG_TYPE + LOCAL)))
    service(b"Short One", LONG_TYPE, 8200, txt([b"ok=1"]))
    recs.append((UNKNOWN_OWNER, UNKNOWN_TYPE, True, UNKNOWN_RDATA))
    recs.append((HOST, A, True, socket.inet_aton(HOST_V4)))
    return recs


RECORDS = _records()


def _read_name(buf, off):
    """(labels lowercased, offset after the name); follows compression pointers."""
    labels, jumped, end, hops = [], False, off, 0
    while True:
        n = buf[off]
        if n & 0xC0 == 0xC0:
            if not jumped:
                end = off + 2
            off = ((n & 0x3F) << 8) | buf[off + 1]
            jumped, hops = True, hops + 1
            if hops > 64:
                raise ValueError("pointer loop")
            continue
        if n == 0:
            return tuple(labels), (end if jumped else off + 1)
        labels.append(bytes(buf[off + 1:off + 1 + n]).lower())
        off += 1 + n


def questions(packet):
    """[(labels, qtype)] of an mDNS query; [] for responses and garbage."""
    if len(packet) < 12:
        return []
    _id, flags, qd = struct.unpack(">HHH", packet[:6])
    if flags & 0x8000:
        return []
    out, off = [], 12
    try:
        for _ in range(qd):
            labels, off = _read_name(packet, off)
            qtype, _qclass = struct.unpack(">HH", packet[off:off + 4])
            off += 4
            out.append((labels, qtype))
    except (IndexError, ValueError, struct.error):
        pass
    return out


def response(qs):
    answers = []
    for labels, qtype in qs:
        for owner, rtype, flush, rdata in RECORDS:
            if tuple(lb.lower() for lb in owner) == labels and qtype in (rtype, ANY):
                rr = wire_name(owner) + struct.pack(">HHIH", rtype, IN | (CACHE_FLUSH if flush else 0),
                                                    120, len(rdata)) + rdata
                if rr not in answers:
                    answers.append(rr)
    if not answers:
        return None
    return struct.pack(">HHHHHH", 0, 0x8400, 0, len(answers), 0, 0) + b"".join(answers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    args = ap.parse_args()
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("", 5353))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                 socket.inet_aton("224.0.0.251") + socket.inet_aton(args.addr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(args.addr))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    while True:
        r, _w, _x = select.select([s, sys.stdin], [], [])
        if sys.stdin in r and not os.read(sys.stdin.fileno(), 4096):
            return
        if s in r:
            packet, _src = s.recvfrom(65535)
            reply = response(questions(packet))
            if reply is not None:
                s.sendto(reply, ("224.0.0.251", 5353))


if __name__ == "__main__":
    main()
