#!/usr/bin/python3
"""A crowd of mDNS devices of one service type on one link, for issue 45's gateway scale
bench (scripts/bench/gateway_scale.py): a thousand far printers without a thousand
python-zeroconf or avahi processes. Run it inside a namespace, on the link's interface.

    crowd.py --iface br-f --type _ipp._tcp --count 1000 [--prefix Crowd]
             [--first-addr 192.0.2.20] [--announce-rounds 2]
             [--churn-fraction F --churn-period S --churn-rounds R]

Device k (0 <= k < count; NNNN is k in four digits) has:

* instance ``<prefix> NNNN.<type>.local``, PTR from ``<type>.local`` (and the crowd one
  PTR ``_services._dns-sd._udp.local`` -> ``<type>.local``, RFC 6763 §9);
* SRV port 10000 + k, target ``<prefix, lowercased>-NNNN.local``; TXT ``dev=NNNN``;
* A: --first-addr + (k % 200). The mDNS gateway announces only instances with an address
  native to the far link, and 1,000 devices do not fit in one /24, so the 200 addresses (all
  in --first-addr's /24) are shared: every device has a host name of its own, several host
  names have the same address.

Every record has a TTL of 4500 s, so nothing expires or is refreshed during a run: what is
measured is the announcements and the answers to browses. SRV, TXT and A are unique records
(the cache-flush bit is set in multicast responses), the PTRs shared.

On start the crowd announces (RFC 6762 §8.3): ``--announce-rounds`` rounds of unsolicited
responses, 1, 2, 4 ... s apart, each device with all four of its records in one packet. Several
devices share a packet (up to 1,400 bytes: about 14), and the packets of a round leave 3 ms
apart (1,000 devices: about 75 packets in 0.2 s), so that no receiver's socket buffer
overflows from a burst that no real crowd of devices would send at one instant.

Then it answers queries. The records are indexed by (name, type), so a query costs its
questions and its answers, not the crowd's size:

* a question for PTR, SRV, TXT, A or ANY of one of its names is answered in the answer
  section, with additional records as RFC 6763 §12 says (after a PTR the instance's SRV, TXT
  and A, after an SRV its A), right away (no 20-120 ms delay: one process answers for all);
* known-answer suppression (RFC 6762 §7.1): an answer the query lists with at least half
  its TTL left is not given; a truncated query (TC bit, §7.2) is answered 400-500 ms later,
  after the known answers of the sender's next packets;
* no record is multicast in answer to a query within 1 s of its last multicast (§6);
* a large answer is split into packets of up to 1,400 bytes, each device's records in one
  packet, paced like the announcements;
* QU questions get multicast answers (§5.4 allows it); a query from a port other than 5353
  (legacy unicast, §6.7) gets a unicast reply with its ID and questions, TTLs capped at 10 s
  and no cache-flush bit.

Churn (issue 45's "10 % leave and return every minute"), off unless --churn-fraction is
given: in round r (1 to R), S * r seconds after the first announcement, the devices
(r - 1) * n ... r * n - 1 (n = F * count, rounded, at least 1; indexes modulo count, so the
rounds rotate through the crowd) LEAVE: goodbyes (RFC 6762 §10.1: all four records of each
device with TTL 0), packed and paced like the announcements; from its goodbye packet on a
device's records are neither given in answers nor sent in answers already scheduled. S / 2
seconds later they RETURN: they answer again and are announced as at the start
(--announce-rounds rounds, 1, 2, 4 ... s apart). On stdout, flushed, one line per device and
change: ``leave T LABEL`` (T: time.time() when the packet with its goodbyes was sent) and
``return T LABEL`` (when the packet with its first new announcement was sent), LABEL being the
instance's first label (``Crowd 0042``); and ``crowd: churn N left (P packets)``,
``crowd: churn N returned (P packets)`` per round, ``crowd: churn done`` after the last.

IPv4 only. It shares 0.0.0.0:5353 with the namespace's other responders
(late_devices.mdns_socket: SO_REUSEPORT, IP TTL 255, no multicast loopback). On stdout:
``crowd: ready``, ``crowd: announced T`` (time.time() of the first announcement packet),
``crowd: round N sent (P packets)``. Exits 0 on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import heapq
import ipaddress
import random
import select
import signal
import socket
import struct
import sys
import time

import dns.flags
import dns.message

from late_devices import LEGACY_TTL, MDNS_ADDR, MDNS_PORT, mdns_socket

T_A, T_PTR, T_TXT, T_SRV, T_ANY = 1, 12, 16, 33, 255
CLASS_IN, CLASS_ANY, CACHE_FLUSH = 1, 255, 0x8000
TTL = 4500
BASE_PORT = 10000
ADDRESS_POOL = 200
MAX_PACKET = 1400          # bytes of DNS message: within a 1,500-byte MTU with IP and UDP
PACKET_GAP = 0.003         # seconds between the packets of a round or of a large answer
TC_WAIT = (0.4, 0.5)       # RFC 6762 §7.2
REPEAT_GAP = 1.0           # RFC 6762 §6
META = (b"_services", b"_dns-sd", b"_udp", b"local")


def labels(text: str) -> tuple:
    """A name as a tuple of labels without the root: "a b.local." -> (b"a b", b"local")."""
    return tuple(part.encode("utf-8") for part in text.rstrip(".").split("."))


def canon(name: tuple) -> bytes:
    """A name's uncompressed, lowercased wire form: the key names are compared by."""
    return b"".join(bytes([len(label)]) + label.lower() for label in name) + b"\0"


class Record:
    """One resource record of the crowd. `rdata`: the target's labels (PTR), (port, target
    labels) (SRV), or the wire RDATA (TXT, A). `device` is k, or None for the crowd's
    service-enumeration PTR. `key` is what a known answer must match (RFC 6762 §7.1)."""

    __slots__ = ("owner", "rtype", "rdata", "unique", "device", "key")

    def __init__(self, owner, rtype, rdata, unique, device):
        self.owner, self.rtype, self.rdata, self.unique, self.device = owner, rtype, rdata, unique, device
        self.key = (canon(owner), rtype, _canon_rdata(rtype, rdata))


def _canon_rdata(rtype, rdata):
    if rtype == T_PTR:
        return canon(rdata)
    if rtype == T_SRV:
        port, target = rdata
        return struct.pack(">HHH", 0, 0, port) + canon(target)
    return rdata


def device_address(first_addr: str, k: int) -> str:
    """Device k's IPv4 address: first_addr + k % 200 (the bench checks resolutions by it)."""
    return str(ipaddress.IPv4Address(first_addr) + k % ADDRESS_POOL)


def make_devices(stype: str, count: int, prefix: str, first_addr: str):
    """[[PTR, SRV, TXT, A] of device k for k in range(count)] and the enumeration PTR."""
    service = labels(stype + ".local")
    devices = []
    for k in range(count):
        number = "%04d" % k
        instance = (("%s %s" % (prefix, number)).encode("utf-8"),) + service
        host = (("%s-%s" % (prefix.lower(), number)).encode("utf-8"), b"local")
        devices.append([
            Record(service, T_PTR, instance, False, k),
            Record(instance, T_SRV, (BASE_PORT + k, host), True, k),
            Record(instance, T_TXT, b"\x08dev=" + number.encode(), True, k),
            Record(host, T_A, socket.inet_aton(device_address(first_addr, k)), True, k),
        ])
    return devices, Record(META, T_PTR, service, False, None)


def encode(answers, additionals=(), query=None, ttl=TTL):
    """One response message: `answers` and `additionals` (Records) with name compression
    (RFC 1035 §4.1.4; mDNS allows it in SRV targets too, RFC 6762 §18.14). `query`: a legacy
    unicast query being replied to (its ID and questions copied, TTLs capped, no
    cache-flush); None for a multicast response (ID 0, no questions). `ttl`: every record's
    TTL in a multicast response (0: goodbyes)."""
    buf = bytearray()
    offsets = {}

    def name(owner):
        for i in range(len(owner)):
            suffix = tuple(label.lower() for label in owner[i:])
            at = offsets.get(suffix)
            if at is not None:
                buf.extend(struct.pack(">H", 0xC000 | at))
                return
            if len(buf) < 0x3FFF:
                offsets[suffix] = len(buf)
            buf.append(len(owner[i]))
            buf.extend(owner[i])
        buf.append(0)

    questions = [] if query is None else query.question
    buf.extend(struct.pack(">HHHHHH", query.id if query is not None else 0, 0x8400,
                           len(questions), len(answers), 0, len(additionals)))
    for q in questions:
        name(tuple(q.name.labels[:-1]))
        buf.extend(struct.pack(">HH", q.rdtype, CLASS_IN))
    for r in list(answers) + list(additionals):
        name(r.owner)
        flush = CACHE_FLUSH if r.unique and query is None else 0
        buf.extend(struct.pack(">HHIH", r.rtype, CLASS_IN | flush, ttl if query is None else min(ttl, LEGACY_TTL), 0))
        start = len(buf)
        if r.rtype == T_PTR:
            name(r.rdata)
        elif r.rtype == T_SRV:
            buf.extend(struct.pack(">HHH", 0, 0, r.rdata[0]))
            name(r.rdata[1])
        else:
            buf.extend(r.rdata)
        struct.pack_into(">H", buf, start - 2, len(buf) - start)
    return bytes(buf)


def pack(groups, query=None, ttl=TTL):
    """[(wire, records, answer count)]: `groups` ([(answers, additionals)], one a device) in as
    few messages of at most MAX_PACKET bytes as they fit, a group never split (a lone group
    too large for one packet would go alone: none of the crowd's is). `records` is the
    message's answers, then its additionals."""
    out, answers, additionals, taken = [], [], [], 0
    wire = b""
    for ans, add in groups:
        trial = encode(answers + ans, additionals + add, query, ttl)
        if len(trial) > MAX_PACKET and taken:
            out.append((wire, answers + additionals, len(answers)))
            answers, additionals, taken = [], [], 0
            trial = encode(ans, add, query, ttl)
        answers, additionals, taken, wire = answers + ans, additionals + add, taken + 1, trial
    if taken:
        out.append((wire, answers + additionals, len(answers)))
    return out


def known_answers(msg):
    """The keys of the known answers in `msg` with at least half the crowd's TTL left."""
    out = set()
    for rrset in msg.answer:
        if rrset.rdclass != CLASS_IN or rrset.ttl * 2 < TTL:
            continue
        owner = canon(tuple(rrset.name.labels[:-1]))
        for rd in rrset:
            if rrset.rdtype == T_PTR:
                rdata = canon(tuple(rd.target.labels[:-1]))
            elif rrset.rdtype == T_SRV:
                rdata = struct.pack(">HHH", rd.priority, rd.weight, rd.port) + canon(tuple(rd.target.labels[:-1]))
            elif rrset.rdtype == T_TXT:
                rdata = b"".join(bytes([len(s)]) + s for s in rd.strings)
            elif rrset.rdtype == T_A:
                rdata = socket.inet_aton(rd.address)
            else:
                continue
            out.add((owner, rrset.rdtype, rdata))
    return out


class Crowd:
    """The devices' records, indexed, and the responder's schedule (a heap of timed sends)."""

    def __init__(self, devices, meta, sock, rounds, out=sys.stdout):
        self.devices = devices
        self.sock = sock
        self.rounds = rounds
        self.out = out
        self.by_type = {}      # (owner key, rtype) -> [Record]
        self.by_owner = {}     # owner key -> [Record] (ANY questions)
        for r in [meta] + [r for device in devices for r in device]:
            self.by_type.setdefault((r.key[0], r.rtype), []).append(r)
            self.by_owner.setdefault(r.key[0], []).append(r)
        self.last_multicast = {}   # Record -> monotonic time
        self.truncated = {}        # (src, sport) -> [due, questions, known keys]
        self.heap = []
        self.seq = 0
        self.announced_at = None
        self.absent = set()        # devices that left (churn) and have not returned

    def later(self, due, action):
        self.seq += 1
        heapq.heappush(self.heap, (due, self.seq, action))

    def say(self, text):
        self.out.write("crowd: %s\n" % text)
        self.out.flush()

    def send(self, wire, records, dest, n_answers=None, query=None, event=None):
        """Sends one packet. `event` "leave": the packet holds goodbyes, and its devices are
        absent from now on; "return": the packet is the first announcement of returning
        devices, present again from now on; None: any of its records whose device is absent
        (it left since the packet was made) are left out. "leave" and "return" print the
        event line of each of the packet's devices."""
        devices = []
        if event is not None:
            devices = list(dict.fromkeys(r.device for r in records if r.device is not None))
            if event == "return":
                self.absent.difference_update(devices)
        elif self.absent and any(r.device in self.absent for r in records):
            keep = [i for i, r in enumerate(records) if r.device is None or r.device not in self.absent]
            if not keep:
                return
            n = len(records) if n_answers is None else n_answers
            records_ = [records[i] for i in keep]
            n_answers = sum(1 for i in keep if i < n)
            records = records_
            wire = encode(records[:n_answers], records[n_answers:], query)
        try:
            self.sock.sendto(wire, dest)
        except OSError as e:
            print("crowd: send to %s:%d failed: %s" % (dest[0], dest[1], e), file=sys.stderr, flush=True)
            return
        finally:
            if event == "leave":
                self.absent.update(devices)
        if event is not None:
            at = time.time()
            self.out.write("".join("%s %.3f %s\n" % (event, at, self.devices[k][1].owner[0].decode("utf-8"))
                                   for k in devices))
            self.out.flush()
        if dest == (MDNS_ADDR, MDNS_PORT) and event != "leave":
            now = time.monotonic()
            for r in records:
                self.last_multicast[r] = now

    def send_paced(self, packets, start, dest, done=None, query=None, event=None):
        """Schedules `packets` PACKET_GAP apart from `start`; `done` runs after the last."""
        for i, (wire, records, n_answers) in enumerate(packets):
            self.later(start + i * PACKET_GAP,
                       lambda w=wire, r=records, n=n_answers: self.send(w, r, dest, n, query, event))
        if done is not None:
            self.later(start + len(packets) * PACKET_GAP, done)

    def announce(self, start):
        """RFC 6762 §8.3: every device's records, unsolicited, in rounds 1, 2, 4 ... s apart."""
        packets = pack([(device, []) for device in self.devices])

        def first():
            self.announced_at = time.time()
            self.say("announced %.3f" % self.announced_at)
        self.later(start, first)
        for n in range(self.rounds):
            self.send_paced(packets, start + (2 ** n - 1), (MDNS_ADDR, MDNS_PORT),
                            done=lambda n=n: self.say("round %d sent (%d packets)" % (n + 1, len(packets))))

    def churn(self, start, fraction, period, rounds):
        """Schedules the churn rounds (see the module's docstring) from `start` (monotonic,
        the first announcement's)."""
        count = len(self.devices)
        n = min(count, max(1, int(round(fraction * count))))
        for r in range(1, rounds + 1):
            chosen = [self.devices[((r - 1) * n + j) % count] for j in range(n)]
            leave, back = start + r * period, start + r * period + period / 2
            goodbyes = pack([(device, []) for device in chosen], ttl=0)
            self.send_paced(goodbyes, leave, (MDNS_ADDR, MDNS_PORT), event="leave",
                            done=lambda r=r, p=len(goodbyes): self.say("churn %d left (%d packets)" % (r, p)))
            hello = pack([(device, []) for device in chosen])
            for a in range(self.rounds):
                done = None
                if a == self.rounds - 1:
                    def done(r=r, p=len(hello), last=r == rounds):
                        self.say("churn %d returned (%d packets)" % (r, p))
                        if last:
                            self.say("churn done")
                self.send_paced(hello, back + (2 ** a - 1), (MDNS_ADDR, MDNS_PORT),
                                event="return" if a == 0 else None, done=done)

    def groups(self, questions, known, multicast):
        """[(answers, additionals)] per device for `questions`, less `known` answers and,
        when `multicast`, less answers multicast within REPEAT_GAP."""
        now = time.monotonic()
        answers = {}
        for q in questions:
            if q.rdclass & 0x7FFF not in (CLASS_IN, CLASS_ANY):
                continue
            owner = q.name.to_digestable()
            found = self.by_owner.get(owner, ()) if q.rdtype == T_ANY else self.by_type.get((owner, q.rdtype), ())
            for r in found:
                if r.device in self.absent:
                    continue
                if r.key in known:
                    continue
                if multicast and now - self.last_multicast.get(r, -REPEAT_GAP) < REPEAT_GAP:
                    continue
                answers[r] = None
        per_device = {}
        for r in answers:
            per_device.setdefault(r.device, ([], []))[0].append(r)
        for device, (ans, add) in per_device.items():
            if device is None:
                continue
            types = {r.rtype for r in ans}
            extra = ({T_SRV, T_TXT, T_A} if T_PTR in types else set()) | ({T_A} if T_SRV in types else set())
            add.extend(r for r in self.devices[device] if r.rtype in extra and r not in answers)
        return list(per_device.values())

    def answer(self, questions, known, query, dest):
        packets = pack(self.groups(questions, known, query is None), query)
        if packets:
            self.send_paced(packets, time.monotonic(), dest, query=query)

    def answer_truncated(self, source):
        pending = self.truncated.get(source)
        if pending is None:
            return
        due, questions, known = pending
        if due > time.monotonic():   # a later packet of the query moved the answer on
            self.later(due, lambda: self.answer_truncated(source))
            return
        del self.truncated[source]
        self.answer(questions, known, None, (MDNS_ADDR, MDNS_PORT))

    def on_packet(self, wire, src, sport):
        try:
            msg = dns.message.from_wire(wire)
        except Exception:  # noqa: BLE001 - not DNS, or something we cannot read
            return
        if msg.flags & dns.flags.QR:
            return
        if sport != MDNS_PORT:
            self.answer(msg.question, set(), msg, (src, sport))
            return
        source = (src, sport)
        known = known_answers(msg)
        pending = self.truncated.get(source)
        if pending is not None:
            # RFC 6762 §7.2: the next packets of a truncated query carry more known answers
            pending[1].extend(msg.question)
            pending[2] |= known
            pending[0] = time.monotonic() + (random.uniform(*TC_WAIT) if msg.flags & dns.flags.TC else 0.0)
            return
        if msg.flags & dns.flags.TC:
            due = time.monotonic() + random.uniform(*TC_WAIT)
            self.truncated[source] = [due, list(msg.question), known]
            self.later(due, lambda: self.answer_truncated(source))
            return
        self.answer(msg.question, known, None, (MDNS_ADDR, MDNS_PORT))

    def run(self):
        while True:
            now = time.monotonic()
            while self.heap and self.heap[0][0] <= now:
                heapq.heappop(self.heap)[2]()
            timeout = max(0.0, self.heap[0][0] - time.monotonic()) if self.heap else None
            ready, _w, _x = select.select([self.sock], [], [], timeout)
            while ready:
                try:
                    wire, (src, sport) = self.sock.recvfrom(9000)
                except BlockingIOError:
                    break
                self.on_packet(wire, src, sport)


class _Stop(Exception):
    pass


def _stop(*_a):
    raise _Stop()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iface", required=True)
    ap.add_argument("--type", required=True, help="service type, e.g. _ipp._tcp")
    ap.add_argument("--count", type=int, required=True, help="devices, 1 to 9999")
    ap.add_argument("--prefix", default="Crowd", help="instance names' first word (no dot)")
    ap.add_argument("--first-addr", default="192.0.2.20", help="the first of the 200 addresses")
    ap.add_argument("--announce-rounds", type=int, default=2, help="announcements per device, 1 to 3")
    ap.add_argument("--churn-fraction", type=float, metavar="F",
                    help="churn: the fraction of the devices that leave and return each round (0 < F <= 1)")
    ap.add_argument("--churn-period", type=float, metavar="S", default=60.0,
                    help="churn: seconds between rounds (the first S s after the first announcement)")
    ap.add_argument("--churn-rounds", type=int, metavar="R", default=10, help="churn: rounds")
    args = ap.parse_args(argv)
    if not 1 <= args.count <= 9999:
        ap.error("--count must be 1 to 9999")
    if not args.prefix or "." in args.prefix:
        ap.error("--prefix must be a non-empty label without dots")
    if not 1 <= args.announce_rounds <= 3:
        ap.error("--announce-rounds must be 1 to 3 (all within 5 s)")
    if args.churn_fraction is not None:
        if not 0 < args.churn_fraction <= 1:
            ap.error("--churn-fraction must be above 0 and at most 1")
        if args.churn_period < 2 * (2 ** (args.announce_rounds - 1) + 1):
            ap.error("--churn-period must leave S / 2 s for the announcements and a second after them")
        if args.churn_rounds < 1:
            ap.error("--churn-rounds must be at least 1")
    first = ipaddress.IPv4Address(args.first_addr)
    if int(first) % 256 + ADDRESS_POOL - 1 > 254:
        ap.error("--first-addr leaves no room for %d addresses in its /24" % ADDRESS_POOL)
    devices, meta = make_devices(args.type, args.count, args.prefix, args.first_addr)
    sock = mdns_socket(args.iface)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    crowd = Crowd(devices, meta, sock, args.announce_rounds)
    crowd.say("ready")
    start = time.monotonic()
    crowd.announce(start)
    if args.churn_fraction is not None:
        crowd.churn(start, args.churn_fraction, args.churn_period, args.churn_rounds)
    try:
        crowd.run()
    except _Stop:
        pass
    finally:
        sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
