"""A small DSO (RFC 8490) / DNS Push (RFC 8765) client for the integration tests:
Python's ssl module for TLS, dnspython for names and RDATA."""

from __future__ import annotations

import select
import socket
import ssl
import struct
import time

import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype

import lab as L

KEEPALIVE, RETRY_DELAY, PADDING = 0x0001, 0x0002, 0x0003
SUBSCRIBE, PUSH, UNSUBSCRIBE, RECONFIRM = 0x0040, 0x0041, 0x0042, 0x0043
NOERROR, FORMERR, NOTIMP, REFUSED, NOTAUTH, DSOTYPENI = 0, 1, 4, 5, 9, 11
REMOVE_ONE, REMOVE_SET = 0xFFFFFFFF, 0xFFFFFFFE


def tlv(t, data=b""):
    return struct.pack(">HH", t, len(data)) + data


def message(mid, tlvs=b"", qr=False, rcode=0, counts=(0, 0, 0, 0)):
    flags = (0x8000 if qr else 0) | (6 << 11) | rcode
    return struct.pack(">HHHHHH", mid, flags, *counts) + tlvs


def keepalive_tlv(inactivity=15000, keepalive=15000):
    return tlv(KEEPALIVE, struct.pack(">II", inactivity, keepalive))


def subscribe_tlv(qname, rdtype, rdclass=1):
    return tlv(SUBSCRIBE, dns.name.from_text(str(qname)).to_wire() + struct.pack(">HH", rdtype, rdclass))


def unsubscribe_tlv(mid):
    return tlv(UNSUBSCRIBE, struct.pack(">H", mid))


def reconfirm_tlv(qname, rdtype, rdata_wire, rdclass=1):
    return tlv(RECONFIRM, dns.name.from_text(str(qname)).to_wire() + struct.pack(">HH", rdtype, rdclass) + rdata_wire)


class Reply:
    def __init__(self, wire):
        self.wire = wire
        (self.id, flags, *self.counts) = struct.unpack(">HHHHHH", wire[:12])
        self.qr = bool(flags & 0x8000)
        self.opcode = (flags >> 11) & 0xF
        self.rcode = flags & 0xF
        self.tlvs = []
        i = 12 if self.opcode == 6 else len(wire)  # only DSO messages carry TLVs
        while i + 4 <= len(wire):
            t, n = struct.unpack(">HH", wire[i:i + 4])
            self.tlvs.append((t, wire[i + 4:i + 4 + n]))
            i += 4 + n

    def tlv(self, t):
        return next((d for tt, d in self.tlvs if tt == t), None)

    def changes(self):
        """PUSH change records: list of (name, type, class, ttl, rdata or None)."""
        data = self.tlv(PUSH)
        out = []
        i = 0
        while data is not None and i < len(data):
            n, used = dns.name.from_wire(data, i)
            i += used
            t, c, ttl, rdlen = struct.unpack(">HHIH", data[i:i + 10])
            i += 10
            rd = None
            if rdlen and c != 255 and t != 255:
                rd = dns.rdata.from_wire(dns.rdataclass.IN, t, data, i, rdlen)
            i += rdlen
            out.append((n, t, c, ttl, rd))
        return out


class Client:
    """One DSO connection to the proxy, over TLS (default) or plain TCP, from inside dpt-r.

    `ns`, `host` and `source` connect from another namespace (a client's), to another of the
    proxy's addresses, from a given source address. Every byte read from the connection is
    kept in `received` (test_trust.py searches it)."""

    def __init__(self, port, tls=True, cafile=None, server_hostname=None, timeout=10.0,
                 ns=None, host=None, source=None):
        host = host or L.PROXY_ADDR
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with L.netns(ns or L.NS_R):
            raw = socket.socket(family, socket.SOCK_STREAM)
        raw.settimeout(timeout)
        if source:
            raw.bind((source, 0))
        raw.connect((host, port))
        if tls:
            ctx = ssl.create_default_context(cafile=cafile) if cafile else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            if not cafile:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            self.sock = ctx.wrap_socket(raw, server_hostname=server_hostname or "ns.example")
        else:
            self.sock = raw
        self.buf = b""
        self.received = b""

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, wire):
        self.sock.sendall(struct.pack(">H", len(wire)) + wire)

    def send_raw(self, data):
        """One write: with TLS, one TLS record."""
        self.sock.sendall(data)

    def _fill(self, deadline):
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no DSO message in time")
            if not (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()):
                r, _, _ = select.select([self.sock], [], [], remaining)
                if not r:
                    continue
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the server")
            self.buf += data
            self.received += data
            return

    def recv(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while len(self.buf) < 2 or len(self.buf) < 2 + struct.unpack(">H", self.buf[:2])[0]:
            self._fill(deadline)
        (n,) = struct.unpack(">H", self.buf[:2])
        wire, self.buf = self.buf[2:2 + n], self.buf[2 + n:]
        return Reply(wire)

    def request(self, wire, timeout=10.0):
        self.send(wire)
        return self.recv(timeout)

    def establish(self):
        r = self.request(message(1, keepalive_tlv()))
        assert r.qr and r.rcode == NOERROR, r.rcode
        return r

    def closed_within(self, timeout):
        """Seconds until the server closed (FIN or RST), or None; data read meanwhile is discarded."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            try:
                self._fill(deadline)
            except TimeoutError:
                return None
            except (ConnectionError, OSError, ssl.SSLError):
                return time.monotonic() - t0
        return None

    def push_changes(self, timeout, want=lambda ch: True):
        """Read PUSH messages until a change satisfying `want` arrives; return (change, seconds)."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        while True:
            r = self.recv(max(0.01, deadline - time.monotonic()))
            assert r.id == 0 and not r.qr, "expected a unidirectional PUSH"
            for ch in r.changes():
                if want(ch):
                    return ch, time.monotonic() - t0
