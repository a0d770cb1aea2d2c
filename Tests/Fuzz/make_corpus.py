#!/usr/bin/env python3
"""Writes the seed corpus under Tests/Fuzz/corpus/{decode,query,tcp}/ (run from the repo root).

Real dig-style queries (browse, resolve, SOA, reverse, EDNS, TCP-style IDs) plus malformed
ones. The decode and query harnesses start from the same seeds; the decode corpus also gets
some responses. The tcp seeds follow TCPHarness.swift's layout: a control octet, chunk sizes,
then a stream of length-prefixed messages whose first octet scripts the responder.
"""
import os
import struct

def name(text):
    out = b""
    if text not in (".", ""):
        for label in text.rstrip(".").split("."):
            raw = label.replace("\\032", " ").encode()
            out += bytes([len(raw)]) + raw
    return out + b"\x00"

def header(id=0x1234, flags=0x0100, qd=1, an=0, ns=0, ar=0):
    return struct.pack(">HHHHHH", id, flags, qd, an, ns, ar)

def opt(payload=1232, version=0, do=False, rdata=b""):
    ttl = (version << 16) | (0x8000 if do else 0)
    return b"\x00" + struct.pack(">HHIH", 41, payload, ttl, len(rdata)) + rdata

def query(qname, qtype, qclass=1, id=0x1234, flags=0x0100, edns=True, **kw):
    ar = 1 if edns else 0
    body = name(qname) + struct.pack(">HH", qtype, qclass)
    return header(id=id, flags=flags, ar=ar) + body + (opt(**kw) if edns else b"")

A, NS, SOA, PTR, TXT, AAAA, SRV, DS, ANY = 1, 2, 6, 12, 16, 28, 33, 43, 255
seeds = {
    "soa-apex": query("lab1.example.", SOA),
    "soa-apex-noedns": query("lab1.example.", SOA, edns=False),
    "ns-apex": query("lab1.example.", NS),
    "soa-below": query("_ipp._tcp.lab1.example.", SOA),
    "ds-below": query("x.lab1.example.", DS),
    "services": query("_services._dns-sd._udp.lab1.example.", PTR),
    "browse-ipp": query("_ipp._tcp.lab1.example.", PTR),
    "browse-ipp-odd-id": query("_ipp._tcp.lab1.example.", PTR, id=0x1235),
    "browse-http-lab2": query("_http._tcp.lab2.example.", PTR),
    "browse-denied-lab2": query("_airplay._tcp.lab2.example.", PTR),
    "browse-sub": query("_printer._sub._ipp._tcp.lab1.example.", PTR),
    "resolve-srv": query("My\\032Printer._ipp._tcp.lab1.example.", SRV),
    "resolve-txt": query("My\\032Printer._ipp._tcp.lab1.example.", TXT),
    "resolve-any": query("My\\032Printer._ipp._tcp.lab1.example.", ANY),
    "host-a": query("printer.lab1.example.", A),
    "host-aaaa": query("printer.lab1.example.", AAAA),
    "host-a-noedns": query("printer.lab1.example.", A, edns=False),
    "b-dns-sd": query("b._dns-sd._udp.lab1.example.", PTR),
    "lb-dns-sd": query("lb._dns-sd._udp.lab1.example.", PTR),
    "b-dns-sd-reverse": query("b._dns-sd._udp.0.2.0.192.in-addr.arpa.", PTR),
    "reverse-v4": query("7.2.0.192.in-addr.arpa.", PTR),
    "reverse-v6": query(".".join("1" + "0" * 15) + "." + "0.0.0.0.1.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", PTR),
    "dns-update": query("_dns-update._udp.lab1.example.", SRV),
    "dns-llq": query("_dns-llq._udp.lab1.example.", SRV),
    "push-tls": query("_dns-push-tls._tcp.lab1.example.", SRV),
    "outside": query("example.com.", A),
    "root": query(".", NS),
    "class-ch": query("lab1.example.", SOA, qclass=3),
    "class-any": query("lab1.example.", SOA, qclass=255),
    "edns-v1": query("lab1.example.", SOA, version=1),
    "edns-do-cookie": query("_ipp._tcp.lab1.example.", PTR, do=True,
                            rdata=struct.pack(">HH", 10, 8) + b"\x01\x02\x03\x04\x05\x06\x07\x08"),
    "edns-small-payload": query("_ipp._tcp.lab1.example.", PTR, payload=100),
    "edns-big-payload": query("_ipp._tcp.lab1.example.", PTR, payload=65535),
    "opcode-notify": query("lab1.example.", SOA, flags=0x2100),
    "opcode-update": query("lab1.example.", SOA, flags=0x2900),
    "opcode-dso": header(flags=0x3000, qd=0),
    "tc-set": query("lab1.example.", SOA, flags=0x0300),
    "response-bit": query("lab1.example.", SOA, flags=0x8100),
    "qdcount-0": header(qd=0),
    "qdcount-2": header(qd=2) + name("lab1.example.") + struct.pack(">HH", SOA, 1) * 1
                 + name("lab2.example.") + struct.pack(">HH", SOA, 1),
    "compressed-q2": header(qd=2) + name("lab1.example.") + struct.pack(">HH", SOA, 1)
                     + b"\x04_ipp\xc0\x0c" + struct.pack(">HH", PTR, 1),
    "pointer-loop": header() + b"\xc0\x0c" + struct.pack(">HH", A, 1),
    "pointer-forward": header() + b"\xc0\x12\x00\x01\x00\x01\x04lab1\x00",
    "pointer-header": header() + b"\xc0\x02" + struct.pack(">HH", A, 1),
    "label-64": header() + b"\x40" + b"a" * 64 + b"\x00" + struct.pack(">HH", A, 1),
    "name-over-255": header() + (b"\x3f" + b"a" * 63) * 4 + b"\x00" + struct.pack(">HH", A, 1),
    "truncated-header": header()[:7],
    "truncated-question": query("lab1.example.", SOA)[:20],
    "counts-lie-more": header(an=3) + name("lab1.example.") + struct.pack(">HH", SOA, 1),
    "trailing-garbage": query("lab1.example.", SOA) + b"\xde\xad\xbe\xef",
    "two-opt": header(ar=2) + name("lab1.example.") + struct.pack(">HH", SOA, 1) + opt() + opt(),
    "opt-not-root": header(ar=1) + name("lab1.example.") + struct.pack(">HH", SOA, 1)
                    + name("x.") + opt()[1:],
    "opt-in-answer": header(an=1) + name("lab1.example.") + struct.pack(">HH", SOA, 1) + opt(),
    "huge-rdlength": header(ar=1) + name("lab1.example.") + struct.pack(">HH", SOA, 1)
                     + b"\x00" + struct.pack(">HHIH", A, 1, 0, 0xFFFF) + b"\x01\x02\x03\x04",
    "qtype-0": query("lab1.example.", 0),
    "empty": b"",
    "one-byte": b"\x00",
}
responses = {
    "response-soa": header(flags=0x8400, an=1) + name("lab1.example.") + struct.pack(">HH", SOA, 1)
        + b"\xc0\x0c" + struct.pack(">HHI", SOA, 1, 10)
        + (lambda r: struct.pack(">H", len(r)) + r)(b"\x02ns\x07example\x00\x0ahostmaster\xc0\x0c"
                                                     + struct.pack(">IIIII", 1, 7200, 3600, 1209600, 10)),
    "response-ptr-srv-txt": header(flags=0x8400, an=1, ar=3) + name("_ipp._tcp.lab1.example.")
        + struct.pack(">HH", PTR, 1)
        + b"\xc0\x0c" + struct.pack(">HHIH", PTR, 1, 10, 5) + b"\x02Pr\xc0\x0c"
        + b"\xc0\x34" + struct.pack(">HHIH", SRV, 1, 10, 12) + struct.pack(">HHH", 0, 0, 631) + b"\x02pr\xc0\x16"
        + b"\xc0\x34" + struct.pack(">HHIH", TXT, 1, 10, 8) + b"\x07rp=ipp\x00"[:8]
        + opt(),
}

def frame(message):
    return struct.pack(">H", len(message)) + message

def tcp(control, cuts, *messages, tail=b""):
    """control: bits 0-1 in-flight cap (1, 2, 3, default), 2 half-close, 3 complete a deferred
    answer after each chunk, 4 complete the rest newest first."""
    return bytes([control, len(cuts)]) + bytes(cuts) + b"".join(frame(m) for m in messages) + tail

FAST, SLOW, SILENT = b"\x00", b"\x02", b"\x03"
tcp_seeds = {
    "tcp-one-fast": tcp(3, [], FAST + b"\x01query"),
    "tcp-pipelined": tcp(3, [], FAST + b"a", SLOW + b"b", SILENT + b"c", FAST + b"d", SLOW + b"e"),
    "tcp-cap1-halfclose": tcp(4, [0, 1, 2], SLOW + b"a", SLOW + b"b", FAST + b"c"),
    "tcp-one-byte-chunks": tcp(2, [0], SLOW + b"x" * 20, FAST + b"y" * 3),
    "tcp-zero-length": tcp(3, [], b"", FAST + b"after-empty", b""),
    "tcp-partial-tail": tcp(7, [5], FAST + b"whole", tail=b"\xff\xff" + b"abc"),
    "tcp-newest-first": tcp(0x1E, [3, 0], SLOW + b"1", SLOW + b"2", SLOW + b"3", SLOW + b"4", FAST + b"5"),
    "tcp-max-answer": tcp(3, [], FAST + b"\xfe"),
    "tcp-answer-too-big": tcp(7, [], FAST + b"\xff", FAST + b"next"),
    "tcp-real-queries": tcp(0x0B, [11, 40], seeds["browse-ipp"], seeds["soa-apex"], seeds["resolve-srv"]),
    "tcp-max-prefix-never-sent": tcp(3, [], FAST + b"a", tail=b"\xff\xff"),
}

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
for target, data_set in (("decode", {**seeds, **responses}), ("query", seeds), ("tcp", tcp_seeds)):
    folder = os.path.join(root, target)
    os.makedirs(folder, exist_ok=True)
    for key, data in data_set.items():
        with open(os.path.join(folder, key), "wb") as f:
            f.write(data)
print(len(seeds), "query seeds,", len(responses), "responses,", len(tcp_seeds), "tcp streams")
