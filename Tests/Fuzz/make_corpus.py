#!/usr/bin/env python3
"""Writes the seed corpus under Tests/Fuzz/corpus/{decode,query,tcp}/ (run from the repo root).

Real dig-style queries (browse, resolve, SOA, reverse, EDNS, TCP-style IDs) plus malformed
ones. The decode and query harnesses start from the same seeds; the decode corpus also gets
some responses. The tcp seeds follow TCPHarness.swift's layout: a control octet, chunk sizes,
then a stream of length-prefixed messages whose first octet scripts the responder. The dso
seeds follow DSOHarness.swift's layout: a flags octet (client address, limits, how it ends), the
configuration, then operations (raw DSO messages with a 2-octet length, built SUBSCRIBE,
UNSUBSCRIBE, RECONFIRM and Keepalive, clock steps, mDNS events, queries, closes, reloads).
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

# DSO (RFC 8490) messages and the dso harness's operations (DSOHarness.swift).
KEEPALIVE, RETRY_DELAY, PADDING, SUBSCRIBE, PUSH, UNSUBSCRIBE, RECONFIRM = 1, 2, 3, 0x40, 0x41, 0x42, 0x43

def tlv(kind, data=b"", length=None):
    return struct.pack(">HH", kind, len(data) if length is None else length) + data

def dso_msg(id, *tlvs, qr=False, rcode=0, counts=(0, 0, 0, 0)):
    return struct.pack(">HHHHHH", id, (0x8000 if qr else 0) | 6 << 11 | rcode, *counts) + b"".join(tlvs)

def owner(qname, qtype, qclass=1):
    return name(qname) + struct.pack(">HH", qtype, qclass)

def keepalive_tlv(inactivity=15000, interval=60000):
    return tlv(KEEPALIVE, struct.pack(">II", inactivity, interval))

def sub_tlv(qname, qtype, qclass=1):
    return tlv(SUBSCRIBE, owner(qname, qtype, qclass))

# Operations: op octet, then operands.
def op_raw(message):
    return b"\x00" + struct.pack(">H", len(message)) + message
def op_subscribe(id, name_index, type_index, flags=0):
    return b"\x01" + struct.pack(">HBBB", id, name_index, type_index, flags)
def op_unsubscribe(selector):
    return bytes([2, selector])
def op_reconfirm(name_index, type_index, rdata):
    return bytes([3, name_index, type_index, rdata])
def op_keepalive(id, flags=0):
    return b"\x04" + struct.pack(">HB", id, flags)
CLOCK = {"0": 0, "1ms": 1, "10ms": 2, "50ms": 3, "800ms": 4, "1s": 5, "5s": 6, "6s": 7, "15s": 8, "30s": 9,
         "31s": 10, "60s": 11, "121s": 12, "150s": 13, "600s": 14, "7201s": 15}
def op_clock(step):
    return bytes([5, CLOCK[step]])
ADD, REMOVE, ALL_FOR_NOW, RESTARTED, VERIFYING, FAILED = 0, 3, 5, 6, 14, 7
def op_mdns(query, kind, record=0):
    return bytes([6, query, kind, record])
def op_query(name_index, type_index, flags=0):
    return bytes([7, name_index, type_index, flags])
CLOSE, SHUTDOWN = b"\x08", b"\x09"
def op_reload(configuration):
    return bytes([10, configuration])
def op_build(id, type_index, data, flags=0):
    return b"\x0b" + struct.pack(">HBB", id, type_index, len(data)) + bytes([flags]) + data
def op_observe(name_index, type_index):
    return bytes([12, name_index, type_index])

# DSOHarness.names / .types indices.
N_IPP, N_HTTP2, N_INSTANCE, N_HOST, N_SERVICES, N_B, N_APEX, N_REV, N_AIRPLAY2, N_OUTSIDE, N_IPP_CASE, \
    N_INSTANCE2, N_REV2, N_B_REV, N_SERVER, N_SUBTYPE = range(16)
T_PTR, T_SRV, T_TXT, T_A, T_AAAA, T_ANY, T_NSEC, T_SOA, T_NS, T_CNAME, T_PRIVATE, T_ZERO = range(12)
# Flags: client (0 none, 1 192.0.2.10, 2 10.1.2.3, 3 2001:db8:1::5, 4 203.0.113.9, 5 2001:db9::1,
# 6 198.51.100.20, 7 2001:db8:2::9); 0x08 session limit 0; 0x10 end by timeout; 0x20 no batch
# window; 0x40 3 subscriptions at most; 0x80 short timers. Configurations: 0 A, 1 B, 2 open;
# 0x80 added: the default 3600 s keepalive interval (else 60 s).
def dso_seed(flags, configuration, *ops):
    return bytes([flags, configuration]) + b"".join(ops)

IPP, INSTANCE = "_ipp._tcp.lab1.example.", "Fuzz\\032Printer._ipp._tcp.lab1.example."
PTR_RDATA = name("Fuzz\\032Printer._ipp._tcp.lab1.example.")
ka = op_raw(dso_msg(1, keepalive_tlv()))
dso_seeds = {
    "dso-keepalive": dso_seed(1, 0, ka, op_clock("15s"), op_raw(dso_msg(2, keepalive_tlv(1, 2))), op_clock("60s")),
    "dso-subscribe-ptr": dso_seed(1, 0, op_raw(dso_msg(2, sub_tlv(IPP, PTR))), op_mdns(0, ADD, 0),
                                  op_mdns(0, ALL_FOR_NOW), op_clock("10ms"), op_mdns(0, REMOVE, 0), op_clock("10ms")),
    "dso-subscribe-srv": dso_seed(3, 0, op_raw(dso_msg(3, sub_tlv(INSTANCE, SRV))), op_mdns(0, ADD, 0),
                                  op_mdns(0, ADD, 1), op_clock("50ms"), op_mdns(0, FAILED), op_mdns(0, RESTARTED),
                                  op_clock("10ms")),
    "dso-subscribe-any": dso_seed(0x21, 0, op_raw(dso_msg(4, sub_tlv(INSTANCE, ANY))), op_mdns(0, ADD, 0),
                                  op_mdns(1, ADD, 0), op_mdns(2, ADD, 0), op_mdns(3, ADD, 1), op_mdns(4, ADD, 1),
                                  op_mdns(3, VERIFYING), op_mdns(3, ALL_FOR_NOW), op_clock("1s")),
    "dso-subscribe-built": dso_seed(7, 2, op_subscribe(9, N_IPP, T_PTR), op_subscribe(10, N_HTTP2, T_PTR),
                                    op_subscribe(11, N_SUBTYPE, T_PTR), op_subscribe(12, N_HOST, T_A),
                                    op_subscribe(13, N_REV, T_PTR), op_subscribe(14, N_B, T_PTR),
                                    op_subscribe(15, N_APEX, T_SOA), op_subscribe(16, N_INSTANCE, T_NSEC),
                                    op_mdns(0, ADD, 0), op_mdns(1, ADD, 0), op_mdns(2, ADD, 1), op_clock("10ms")),
    "dso-unsubscribe": dso_seed(1, 0, op_raw(dso_msg(2, sub_tlv(IPP, PTR))), op_mdns(0, ADD, 0), op_clock("10ms"),
                                op_raw(dso_msg(0, tlv(UNSUBSCRIBE, struct.pack(">H", 2)))), op_mdns(0, ADD, 1),
                                op_clock("10ms"), op_raw(dso_msg(0, tlv(UNSUBSCRIBE, struct.pack(">H", 77)))),
                                op_clock("150s")),
    "dso-unsubscribe-pending": dso_seed(1, 0, op_subscribe(2, N_IPP, T_PTR), op_mdns(0, ADD, 0),
                                        op_unsubscribe(0x80), op_clock("10ms")),
    "dso-unsubscribe-reuse-id": dso_seed(1, 0, op_subscribe(2, N_IPP, T_PTR), op_mdns(0, ADD, 0),
                                         op_unsubscribe(0x80), op_subscribe(2, N_IPP, T_SRV), op_clock("10ms")),
    "dso-reconfirm": dso_seed(1, 0, op_raw(dso_msg(2, sub_tlv(IPP, PTR))), op_mdns(0, ADD, 0), op_mdns(0, ALL_FOR_NOW),
                              op_clock("1s"), op_raw(dso_msg(0, tlv(RECONFIRM, owner(IPP, PTR) + PTR_RDATA))),
                              op_raw(dso_msg(0, tlv(RECONFIRM, owner(IPP, PTR) + name("Gone._ipp._tcp.lab1.example.")))),
                              op_reconfirm(N_IPP, T_PTR, 0), op_clock("10ms")),
    "dso-reconfirm-any": dso_seed(1, 0, ka, op_raw(dso_msg(0, tlv(RECONFIRM, owner(IPP, ANY))))),
    "dso-padding": dso_seed(1, 0, op_raw(dso_msg(5, keepalive_tlv(), tlv(PADDING, bytes(40)))),
                            op_raw(dso_msg(6, sub_tlv(IPP, PTR), tlv(PADDING, bytes(7)))), op_keepalive(8, 0x7C),
                            op_raw(dso_msg(9, tlv(PADDING, bytes(4))))),
    "dso-retry-delay-from-client": dso_seed(1, 0, ka, op_raw(dso_msg(5, tlv(RETRY_DELAY, struct.pack(">I", 1000))))),
    "dso-retry-delay-unidirectional": dso_seed(1, 0, ka, op_raw(dso_msg(0, tlv(RETRY_DELAY, struct.pack(">I", 0))))),
    "dso-unknown-tlv": dso_seed(1, 0, op_raw(dso_msg(5, tlv(0xF7FF, b"abc"))), ka,
                                op_raw(dso_msg(6, keepalive_tlv(), tlv(0xF7FE, b"x"))), op_raw(dso_msg(0, tlv(0xF7FF)))),
    "dso-push-from-client": dso_seed(1, 0, ka, op_raw(dso_msg(7, tlv(PUSH, owner(IPP, PTR) + struct.pack(">IH", 1, 0))))),
    "dso-duplicate-subscribe": dso_seed(1, 0, op_raw(dso_msg(2, sub_tlv(IPP, PTR))),
                                        op_raw(dso_msg(3, sub_tlv("_IPP._tcp.lab1.example.", PTR)))),
    "dso-reused-id": dso_seed(1, 0, op_subscribe(7, N_IPP, T_PTR), op_keepalive(7)),
    "dso-malformed-tlv-lengths": dso_seed(1, 0, op_raw(dso_msg(5, tlv(KEEPALIVE, bytes(4), length=8))),
                                          op_raw(dso_msg(6, b"\x00\x01\x00")),
                                          op_raw(dso_msg(7, tlv(KEEPALIVE, bytes(7)))),
                                          op_raw(dso_msg(8, tlv(SUBSCRIBE, owner(IPP, PTR) + b"\x00"))),
                                          op_raw(dso_msg(9, tlv(SUBSCRIBE, b"\x04_ipp\xc0\x0c" + struct.pack(">HH", PTR, 1)))),
                                          op_raw(dso_msg(10, tlv(SUBSCRIBE, b"\x05_ipp"))),
                                          op_raw(dso_msg(11, keepalive_tlv(), counts=(1, 0, 0, 0))),
                                          op_raw(dso_msg(0, tlv(UNSUBSCRIBE, b"\x00\x02\x00")))),
    "dso-formerr-then-abort": dso_seed(1, 0, op_raw(dso_msg(0, tlv(KEEPALIVE, bytes(2), length=9)))),
    "dso-response-from-client": dso_seed(1, 0, ka, op_raw(dso_msg(9, qr=True))),
    "dso-unidirectional-first": dso_seed(1, 0, op_raw(dso_msg(0, tlv(UNSUBSCRIBE, struct.pack(">H", 1))))),
    "dso-empty-request": dso_seed(1, 0, op_raw(dso_msg(4)), op_raw(dso_msg(0))),
    "dso-acl-refused": dso_seed(4, 0, ka, op_raw(dso_msg(2, sub_tlv(IPP, PTR))), op_reconfirm(N_IPP, T_PTR, 0),
                                op_query(N_IPP, T_PTR, 1), op_mdns(0, ADD, 0), op_clock("10ms")),
    "dso-acl-refused-v6": dso_seed(5, 0, op_subscribe(2, N_IPP, T_ANY), op_mdns(0, ADD, 0), op_clock("10ms")),
    "dso-view-hidden": dso_seed(2, 0, op_raw(dso_msg(2, sub_tlv("_http._tcp.lab2.example.", PTR))),
                                op_subscribe(3, N_IPP, T_PTR), op_subscribe(4, N_B, T_PTR),
                                op_subscribe(5, N_REV2, T_PTR), op_reconfirm(N_INSTANCE2, T_SRV, 3)),
    "dso-reload-revoke": dso_seed(1, 0, op_subscribe(2, N_HTTP2, T_PTR), op_mdns(0, ADD, 0), op_clock("10ms"),
                                  op_reload(1), op_mdns(0, ADD, 1), op_clock("10ms")),
    "dso-reload-revoke-immediate": dso_seed(1, 0, op_subscribe(2, N_HTTP2, T_SOA), op_reload(1), op_clock("1s")),
    "dso-reload-acl": dso_seed(2, 0, op_subscribe(2, N_IPP, T_PTR), op_reload(1), op_subscribe(3, N_IPP, T_SRV),
                               op_reload(2), op_subscribe(4, N_IPP, T_SRV)),
    "dso-session-limit": dso_seed(0x09, 0, op_raw(dso_msg(2, sub_tlv(IPP, PTR), tlv(PADDING)))),
    "dso-shutdown": dso_seed(1, 0, op_subscribe(2, N_IPP, T_PTR), SHUTDOWN, ka),
    "dso-timeout": dso_seed(0x91, 0, ka, op_clock("5s"), op_clock("6s")),
    "dso-subscribed-timeout": dso_seed(0x11, 0x80, op_subscribe(2, N_INSTANCE, T_TXT), op_mdns(0, ADD, 0), op_clock("121s"),
                                      op_mdns(0, ADD, 1), op_clock("7201s"), op_subscribe(3, N_IPP, T_PTR)),
    "dso-query-on-session": dso_seed(1, 0, op_query(N_IPP, T_PTR, 1), ka, op_query(N_IPP, T_PTR, 1),
                                     op_query(N_IPP, T_PTR, 3)),
    "dso-warm-browse": dso_seed(1, 0, op_query(N_IPP, T_PTR), op_mdns(0, ADD, 0), op_mdns(0, ALL_FOR_NOW),
                                op_clock("800ms"), op_subscribe(2, N_IPP, T_PTR), op_reconfirm(N_IPP, T_PTR, 0)),
    "dso-subscription-limit": dso_seed(0x41, 0, op_subscribe(1, N_IPP, T_PTR), op_subscribe(2, N_IPP, T_SRV),
                                       op_subscribe(3, N_IPP, T_TXT), op_subscribe(4, N_IPP, T_A)),
    "dso-reconnect": dso_seed(1, 0, op_subscribe(2, N_IPP, T_PTR), op_mdns(0, ADD, 0), CLOSE, op_clock("10ms"),
                              op_subscribe(2, N_IPP, T_PTR), op_clock("10ms")),
    "dso-notauth-class": dso_seed(1, 0, op_subscribe(2, N_OUTSIDE, T_A), op_subscribe(3, N_SERVER, T_A),
                                  op_subscribe(4, N_IPP, T_PTR, 2), op_subscribe(5, N_IPP, T_PTR, 1),
                                  op_subscribe(6, N_AIRPLAY2, T_PTR)),
    "dso-observer-reconfirm-allowed": dso_seed(0x21, 0, op_observe(N_IPP, T_PTR), op_mdns(0, ADD, 0), op_mdns(0, ALL_FOR_NOW),
                                               op_clock("1s"), ka, op_reconfirm(N_IPP, T_PTR, 5),
                                               op_reconfirm(N_IPP, T_PTR, 0), op_clock("10ms")),
    "dso-observer-reconfirm-refused": dso_seed(0x24, 0, op_observe(N_IPP, T_PTR), op_mdns(0, ADD, 0), op_mdns(0, ALL_FOR_NOW),
                                               op_clock("1s"), ka, op_reconfirm(N_IPP, T_PTR, 5), op_clock("10ms")),
    "dso-observer-hidden-link": dso_seed(0x22, 0, op_observe(N_HTTP2, T_PTR), op_mdns(0, ADD, 0), op_mdns(0, ALL_FOR_NOW),
                                         op_clock("1s"), ka, op_reconfirm(N_HTTP2, T_PTR, 5), op_clock("10ms")),
    "dso-observer-shared-browse": dso_seed(0x21, 2, op_observe(N_IPP, T_PTR), op_subscribe(5, N_IPP_CASE, T_PTR),
                                           op_mdns(0, ADD, 0), op_unsubscribe(0x80), op_mdns(0, REMOVE, 0),
                                           op_observe(N_INSTANCE, T_ANY), op_mdns(1, ADD, 1), SHUTDOWN),
    "dso-built-messages": dso_seed(1, 0, op_build(1, 0, struct.pack(">II", 1, 2)), op_build(2, 8, b"\x01"),
                                   op_build(0, 6, b"", 0x04), op_build(3, 9, b"", 0x20)),
}

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
for target, data_set in (("decode", {**seeds, **responses}), ("query", seeds), ("tcp", tcp_seeds), ("dso", dso_seeds)):
    folder = os.path.join(root, target)
    os.makedirs(folder, exist_ok=True)
    for key, data in data_set.items():
        with open(os.path.join(folder, key), "wb") as f:
            f.write(data)
print(len(seeds), "query seeds,", len(responses), "responses,", len(tcp_seeds), "tcp streams,",
      len(dso_seeds), "dso scripts")
