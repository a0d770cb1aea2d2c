#!/usr/bin/python3
"""Several devices of one service type that answer mDNS at different speeds (run inside the
far link-1 namespace, lab.NS_L1).

It stands in for, say, a printer that answers at once, a speaker that takes a quarter of a
second and a TV that wakes from standby to answer after more than half a second: one
service type, one link, and answers spread over the time the proxy waits. Nothing about the
link is slow (the conditioner, conditioner.py, does that); each device is.

    late_devices.py --iface dpl1-r --type _foo._tcp --device a:30 --device b:250 --device c:600

``--device NAME:DELAY_MS[:ADDR]`` adds one device (k = 0, 1, ... in command-line order):

* instance ``NAME.<type>.local``, PTR from ``<type>.local``;
* SRV target ``NAME-host.local``, port 9300 + k; TXT ``dev=NAME``;
* A ``ADDR`` (default 192.0.2.160 + k, a documentation address no other lab part uses).

For each mDNS query (QR=0) whose questions ask for one of a device's names (PTR of
``<type>.local``; SRV, TXT, A or ANY of its own names), the device sends one multicast
response DELAY_MS after the query came: AA, from port 5353 to 224.0.0.251:5353, IP TTL 255,
the matching records in the answer section and, after a PTR, its SRV, TXT and A as
additionals (after an SRV, its A). A device answers a given query packet at most once
(whatever it asks), and leaves out a record the query lists as a known answer with at
least half its TTL left (RFC 6762 §7.1); a device left with no answer does not send.
Queries from a port other than 5353 (legacy unicast, RFC 6762 §6.7) get the same records
unicast to the sender, with the query's ID and question, TTLs capped at 10 s.

Limits: IPv4 only (avahi on the router asks over both families and takes the IPv4
answers); no probing, announcing or goodbyes; no cache-flush bit (the records are sent as
shared ones, which avahi caches the same way for this purpose).

It binds 0.0.0.0:5353 with SO_REUSEADDR and SO_REUSEPORT, beside the avahi-daemon and
python-zeroconf already in the namespace, and joins 224.0.0.251 on ``--iface``. It prints
``late-devices: ready`` on stdout once listening, logs each answer (device, ms after the
query) on stderr, and exits 0 on SIGTERM or SIGINT.

build_response() makes one device's message without any network (unit-testable).
"""

from __future__ import annotations

import argparse
import heapq
import select
import signal
import socket
import struct
import sys
import time
from dataclasses import dataclass

import dns.flags
import dns.message
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.rrset

MDNS_ADDR, MDNS_PORT = "224.0.0.251", 5353
BASE_PORT = 9300
BASE_ADDR = "192.0.2.%d"
FIRST_HOST = 160
SERVICE_TTL, HOST_TTL = 4500, 120   # RFC 6762 §10: 75 min for PTR/TXT, 120 s for SRV and A
LEGACY_TTL = 10                      # RFC 6762 §6.7


@dataclass(frozen=True)
class Device:
    name: str
    delay_ms: int
    stype: str        # "_foo._tcp"
    port: int
    addr: str

    @property
    def service(self) -> dns.name.Name:
        return dns.name.from_text(self.stype + ".local.")

    @property
    def instance(self) -> dns.name.Name:
        return dns.name.Name((self.name.encode("utf-8"),) + self.service.labels)

    @property
    def host(self) -> dns.name.Name:
        return dns.name.Name(((self.name + "-host").encode("utf-8"), b"local", b""))

    def records(self):
        """{(owner, rdtype): RRset} of everything this device has."""
        IN, T = dns.rdataclass.IN, dns.rdatatype
        out = {}
        for owner, rdtype, ttl, text in (
                (self.service, T.PTR, SERVICE_TTL, self.instance.to_text()),
                (self.instance, T.SRV, HOST_TTL, "0 0 %d %s" % (self.port, self.host.to_text())),
                (self.instance, T.TXT, SERVICE_TTL, '"dev=%s"' % self.name),
                (self.host, T.A, HOST_TTL, self.addr)):
            out[(owner, rdtype)] = dns.rrset.from_text(owner, ttl, IN, rdtype, text)
        return out


def parse_device(spec: str, stype: str, k: int) -> Device:
    """NAME:DELAY_MS[:ADDR] -> Device (k: its position, for port and default address)."""
    parts = spec.split(":")
    if len(parts) not in (2, 3) or not parts[0] or "." in parts[0]:
        raise ValueError("--device wants NAME:DELAY_MS[:ADDR], got %r" % spec)
    addr = parts[2] if len(parts) == 3 else BASE_ADDR % (FIRST_HOST + k)
    socket.inet_aton(addr)
    return Device(parts[0], int(parts[1]), stype, BASE_PORT + k, addr)


def _known(query: dns.message.Message, rrset: dns.rrset.RRset):
    """The records of `rrset` that `query` lists as known answers with >= half the TTL."""
    out = set()
    for ka in query.answer:
        if ka.name == rrset.name and ka.rdtype == rrset.rdtype and ka.ttl * 2 >= rrset.ttl:
            out |= {rd for rd in ka if rd in rrset}
    return out


def build_response(device: Device, query: dns.message.Message, legacy: bool = False):
    """The response `device` sends to `query`, or None when it has nothing to say.

    Answer section: the device's records that the query's questions ask for (PTR of the
    service type, SRV/TXT/A/ANY of its own names), less known answers (at least half their
    TTL left). Additional section (RFC 6763 §12): after a PTR answer the SRV, TXT and A,
    after an SRV answer the A, each unless already an answer. `legacy`: a unicast reply to a query from a port other than
    5353 (ID and question copied, TTLs <= 10 s)."""
    if query.flags & dns.flags.QR:
        return None
    recs = device.records()
    wanted = []
    for q in query.question:
        if q.rdclass & 0x7FFF not in (dns.rdataclass.IN, dns.rdataclass.ANY):
            continue
        for (owner, rdtype), rs in recs.items():
            if owner == q.name and q.rdtype in (rdtype, dns.rdatatype.ANY) and (owner, rdtype) not in wanted:
                wanted.append((owner, rdtype))
    answers = []
    for key in wanted:
        rs = recs[key]
        keep = [rd for rd in rs if rd not in _known(query, rs)]
        if keep:
            answers.append(dns.rrset.from_rdata_list(rs.name, rs.ttl, keep))
    if not answers:
        return None
    r = dns.message.Message(id=query.id if legacy else 0)
    r.flags = dns.flags.QR | dns.flags.AA
    if legacy:
        r.question = [dns.rrset.RRset(q.name, dns.rdataclass.IN, q.rdtype) for q in query.question]
    r.answer = answers
    # RFC 6763 §12: a PTR answer brings SRV, TXT and A; an SRV answer brings A
    types = {rs.rdtype for rs in answers}
    extra = set()
    if dns.rdatatype.PTR in types:
        extra |= {dns.rdatatype.SRV, dns.rdatatype.TXT, dns.rdatatype.A}
    if dns.rdatatype.SRV in types:
        extra.add(dns.rdatatype.A)
    r.additional = [rs for key, rs in recs.items() if key not in wanted and key[1] in extra]
    if legacy:
        for rs in r.answer + r.additional:
            rs.ttl = min(rs.ttl, LEGACY_TTL)
    return r


def mdns_socket(iface: str) -> socket.socket:
    """UDP 0.0.0.0:5353 shared with the namespace's other responders, in 224.0.0.251 on
    `iface`, sending there with IP TTL 255 and no loopback to ourselves."""
    ifindex = socket.if_nametoindex(iface)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("0.0.0.0", MDNS_PORT))
    mreqn = socket.inet_aton(MDNS_ADDR) + socket.inet_aton("0.0.0.0") + struct.pack("@i", ifindex)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreqn)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF,
                 socket.inet_aton("0.0.0.0") + socket.inet_aton("0.0.0.0") + struct.pack("@i", ifindex))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, 255)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
    s.setblocking(False)
    return s


class _Stop(Exception):
    pass


def _stop(*_a):
    raise _Stop()


def serve(devices, iface, log=sys.stderr):
    sock = mdns_socket(iface)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    pending = []   # heap of (due, seq, device, query, t_query, dest, legacy)
    seq = 0
    sys.stdout.write("late-devices: ready\n")
    sys.stdout.flush()
    try:
        while True:
            now = time.monotonic()
            while pending and pending[0][0] <= now:
                _due, _s, dev, msg, t0, dest, legacy = heapq.heappop(pending)
                r = build_response(dev, msg, legacy)
                if r is None:
                    continue
                try:
                    sock.sendto(r.to_wire(), dest)
                except OSError as e:
                    print("late-devices: %s: send failed: %s" % (dev.name, e), file=log, flush=True)
                    continue
                print("late-devices: %s answered %s %s after %.0f ms" % (
                    dev.name, " ".join("%s/%s" % (rs.name, dns.rdatatype.to_text(rs.rdtype)) for rs in r.answer),
                    "unicast %s:%d" % dest if legacy else "multicast",
                    (time.monotonic() - t0) * 1000.0), file=log, flush=True)
            timeout = max(0.0, pending[0][0] - time.monotonic()) if pending else None
            ready, _w, _x = select.select([sock], [], [], timeout)
            if not ready:
                continue
            while True:
                try:
                    wire, (src, sport) = sock.recvfrom(9000)
                except BlockingIOError:
                    break
                t0 = time.monotonic()
                try:
                    msg = dns.message.from_wire(wire)
                except Exception:  # noqa: BLE001 - not DNS, or something we cannot read
                    continue
                if msg.flags & dns.flags.QR:
                    continue
                legacy = sport != MDNS_PORT
                dest = (src, sport) if legacy else (MDNS_ADDR, MDNS_PORT)
                for dev in devices:
                    # decide now whether the device has anything to say (known answers are
                    # those of this query); build again, identically, when it is due
                    if build_response(dev, msg, legacy) is None:
                        continue
                    seq += 1
                    heapq.heappush(pending, (t0 + dev.delay_ms / 1000.0, seq, dev, msg, t0, dest, legacy))
    except _Stop:
        pass
    finally:
        sock.close()
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iface", required=True)
    ap.add_argument("--type", required=True, help="service type, e.g. _foo._tcp")
    ap.add_argument("--device", action="append", required=True, metavar="NAME:DELAY_MS[:ADDR]")
    args = ap.parse_args(argv)
    devices = [parse_device(spec, args.type, k) for k, spec in enumerate(args.device)]
    return serve(devices, args.iface)


if __name__ == "__main__":
    sys.exit(main())
