#!/usr/bin/python3
"""A link conditioner for mDNS (issue 29): delay, jitter, loss and late answers on one
interface, the way a busy Wi-Fi link or a sleeping printer would give them.

    scripts/link-conditioner.sh --interface eth1 --profile wifi-busy
    scripts/link-conditioner.sh --netns dpt-r --interface dpr-l1 --profile sleepy --seed 3

This kernel has no netem, but it has NFQUEUE. Two iptables chains queue every mDNS packet
(UDP port 5353 either way, IPv4 and IPv6) that enters or leaves the interface. This program holds each one
for the profile's delay and then lets it go, or drops it. The delay is per packet and each
way, so a query and its answer take about twice the profile's delay. Packets of one
direction leave in the order they came, as on a real link's queue. An answer (QR set)
coming in from the link is held for the profile's extra answer delay on top, as when a
device wakes to answer. That delay is the device's (by source address): no other device's
packet waits behind it, and the device's own answers stay in order.

It runs in the current network namespace, or in --netns NAME. It removes its chains on
SIGTERM, SIGINT or any exit, and prints what it did as one line of JSON on stdout. If it
dies without cleaning up, the rules' `--queue-bypass` lets packets through unqueued.
Nothing else on the interface is touched. Needs root, iptables and Debian's
libnetfilter-queue1.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import dataclasses
import errno
import heapq
import json
import os
import random
import select
import signal
import struct
import subprocess
import sys
import time


@dataclasses.dataclass(frozen=True)
class Profile:
    delay_ms: float = 0.0          # each packet, each way
    jitter_ms: float = 0.0         # uniform, +/- around the delay
    loss: float = 0.0              # share of packets dropped, each way
    answer_delay_ms: tuple = (0.0, 0.0)   # extra (min, max), answers coming in from the link
    note: str = ""


PROFILES = {
    "perfect": Profile(note="no change: the lab's own link (well under 1 ms)"),
    "wifi-good": Profile(5, 5, note="5 +/- 5 ms each way"),
    "wifi-busy": Profile(80, 60, 0.03, note="80 +/- 60 ms each way, 3% loss: multicast on a busy Wi-Fi"),
    "sleepy": Profile(5, 5, 0.0, (400, 1500), note="answers 0.4-1.5 s late: devices that wake to answer"),
    "lossy": Profile(0, 0, 0.20, note="20% loss each way"),
}

MDNS_PORT = 5353
NF_DROP, NF_ACCEPT = 0, 1
NF_INET_LOCAL_IN = 1
NFQNL_COPY_PACKET = 2


class Decider:
    """What happens to each packet: a pure function of the profile and a seeded random
    stream, so a run can be repeated (the unit of the conditioner the tests reason about)."""

    def __init__(self, profile: Profile, seed=None):
        self.profile = profile
        self.rng = random.Random(seed)
        self.last_due = {True: 0.0, False: 0.0}   # inbound?, outbound?: FIFO per direction
        self.last_answer_due = {}                  # source address -> a sleeping device's last answer

    def decide(self, now, inbound, is_answer, source=None):
        """(accept, due time)."""
        p = self.profile
        if p.loss and self.rng.random() < p.loss:
            return False, now
        delay = max(0.0, p.delay_ms + self.rng.uniform(-p.jitter_ms, p.jitter_ms))
        due = max(now + delay / 1000.0, self.last_due[inbound])
        self.last_due[inbound] = due
        if inbound and is_answer and p.answer_delay_ms[1] > 0:
            # The device's delay, not the link's: nothing else queues behind a sleeping device,
            # but its own answers stay in order (a goodbye never overtakes its announcement).
            due = max(due + self.rng.uniform(*p.answer_delay_ms) / 1000.0, self.last_answer_due.get(source, 0.0))
            self.last_answer_due[source] = due
        return True, due


def source_address(packet):
    """The source address bytes of an IPv4 or IPv6 packet (b"" if neither)."""
    version = packet[0] >> 4 if packet else 0
    if version == 4:
        return bytes(packet[12:16])
    if version == 6:
        return bytes(packet[8:24])
    return b""


def is_mdns_answer(packet):
    """True for an mDNS response (QR set) in an IPv4 or IPv6 UDP packet."""
    if not packet:
        return False
    version = packet[0] >> 4
    if version == 4:
        udp = (packet[0] & 0x0F) * 4
    elif version == 6:
        udp = 40    # no extension headers in mDNS packets
    else:
        return False
    return len(packet) >= udp + 8 + 3 and bool(packet[udp + 8 + 2] & 0x80)


# ---- libnetfilter_queue (thin ctypes wrapper) ----------------------------------------------

_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


def _library():
    name = ctypes.util.find_library("netfilter_queue") or "libnetfilter_queue.so.1"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as e:
        raise SystemExit("link-conditioner: %s (apt-get install libnetfilter-queue1)" % e)
    lib.nfq_open.restype = ctypes.c_void_p
    lib.nfq_create_queue.restype = ctypes.c_void_p
    lib.nfq_create_queue.argtypes = [ctypes.c_void_p, ctypes.c_uint16, _CALLBACK, ctypes.c_void_p]
    lib.nfq_set_mode.argtypes = [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint32]
    lib.nfq_set_queue_maxlen.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.nfq_fd.argtypes = [ctypes.c_void_p]
    lib.nfq_handle_packet.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.nfq_get_msg_packet_hdr.restype = ctypes.c_void_p
    lib.nfq_get_msg_packet_hdr.argtypes = [ctypes.c_void_p]
    lib.nfq_get_payload.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.nfq_set_verdict.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                                    ctypes.c_void_p]
    lib.nfq_destroy_queue.argtypes = [ctypes.c_void_p]
    lib.nfq_close.argtypes = [ctypes.c_void_p]
    return lib


class Queue:
    """One NFQUEUE: packets in through a callback, verdicts out whenever they are due."""

    def __init__(self, number, on_packet):
        self.lib = _library()
        self.handle = self.lib.nfq_open()
        if not self.handle:
            raise SystemExit("link-conditioner: nfq_open failed (%s); root and nfnetlink_queue are needed"
                             % os.strerror(ctypes.get_errno()))

        def callback(_qh, _msg, nfad, _data):
            hdr = self.lib.nfq_get_msg_packet_hdr(nfad)
            packet_id, _proto, hook = struct.unpack("!IHB", ctypes.string_at(hdr, 7))
            data = ctypes.c_void_p()
            length = self.lib.nfq_get_payload(nfad, ctypes.byref(data))
            payload = ctypes.string_at(data, length) if length > 0 else b""
            on_packet(packet_id, hook == NF_INET_LOCAL_IN, payload)
            return 0

        self._callback = _CALLBACK(callback)   # kept: the C side holds only the pointer
        self.queue = self.lib.nfq_create_queue(self.handle, number, self._callback, None)
        if not self.queue:
            raise SystemExit("link-conditioner: queue %d is taken or unavailable (%s); try --queue N"
                             % (number, os.strerror(ctypes.get_errno())))
        self.lib.nfq_set_mode(self.queue, NFQNL_COPY_PACKET, 0xFFFF)
        self.lib.nfq_set_queue_maxlen(self.queue, 4096)
        self.fd = self.lib.nfq_fd(self.handle)

    def read(self):
        try:
            buf = os.read(self.fd, 0x20000)
        except OSError as e:
            if e.errno == errno.ENOBUFS:   # the kernel's queue overflowed: those packets are gone
                return False
            raise
        self.lib.nfq_handle_packet(self.handle, buf, len(buf))
        return True

    def verdict(self, packet_id, accept):
        self.lib.nfq_set_verdict(self.queue, packet_id, NF_ACCEPT if accept else NF_DROP, 0, None)

    def close(self):
        if self.queue:
            self.lib.nfq_destroy_queue(self.queue)
            self.queue = None
        if self.handle:
            self.lib.nfq_close(self.handle)
            self.handle = None


# ---- the queueing rules ------------------------------------------------------------------
# iptables (its nftables flavour), not nft itself: this kernel has the xtables NFQUEUE target
# (CONFIG_NETFILTER_XT_TARGET_NFQUEUE) but not nft's own queue expression (CONFIG_NFT_QUEUE).

IPTABLES = ("iptables", "ip6tables")


def chains(queue):
    return (("INPUT", "DPT_LINKCOND_%d_IN" % queue, "-i"), ("OUTPUT", "DPT_LINKCOND_%d_OUT" % queue, "-o"))


def rule_commands(interface, queue):
    """The commands that queue the interface's mDNS packets, both ways, IPv4 and IPv6."""
    cmds = []
    for ipt in IPTABLES:
        for hook, chain, side in chains(queue):
            cmds.append([ipt, "-N", chain])
            for port in ("--dport", "--sport"):
                cmds.append([ipt, "-A", chain, side, interface, "-p", "udp", port, str(MDNS_PORT),
                             "-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"])
            cmds.append([ipt, "-I", hook, "-j", chain])
    return cmds


def install(interface, queue):
    remove(queue)
    for cmd in rule_commands(interface, queue):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            remove(queue)
            raise SystemExit("link-conditioner: %s: %s (apt-get install iptables)" % (" ".join(cmd), r.stderr.strip()))


def remove(queue):
    for ipt in IPTABLES:
        for hook, chain, _side in chains(queue):
            for cmd in ([ipt, "-D", hook, "-j", chain], [ipt, "-F", chain], [ipt, "-X", chain]):
                subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# ---- the loop -----------------------------------------------------------------------------

class Conditioner:
    def __init__(self, profile, seed=None):
        self.decider = Decider(profile, seed)
        self.held = []     # heap of (due, sequence, packet id, accept)
        self.sequence = 0
        self.stats = {"packets": 0, "dropped": 0, "answers_held": 0, "inbound": 0, "outbound": 0,
                      "delay_ms_total": 0.0, "delay_ms_max": 0.0, "queue_overflows": 0}

    def on_packet(self, packet_id, inbound, payload):
        now = time.monotonic()
        answer = is_mdns_answer(payload)
        accept, due = self.decider.decide(now, inbound, answer, source_address(payload))
        s = self.stats
        s["packets"] += 1
        s["inbound" if inbound else "outbound"] += 1
        if not accept:
            s["dropped"] += 1
        else:
            delay = (due - now) * 1000.0
            s["delay_ms_total"] += delay
            s["delay_ms_max"] = max(s["delay_ms_max"], delay)
            if inbound and answer:
                s["answers_held"] += 1
        heapq.heappush(self.held, (due, self.sequence, packet_id, accept))
        self.sequence += 1

    def run(self, queue, stop):
        while not stop():
            now = time.monotonic()
            while self.held and self.held[0][0] <= now:
                _due, _seq, packet_id, accept = heapq.heappop(self.held)
                queue.verdict(packet_id, accept)
            timeout = min(0.2, max(0.0, self.held[0][0] - now)) if self.held else 0.2
            ready, _, _ = select.select([queue.fd], [], [], timeout)
            if ready and not queue.read():
                self.stats["queue_overflows"] += 1
        for _due, _seq, packet_id, accept in self.held:   # let the held packets go on exit
            queue.verdict(packet_id, accept)

    def summary(self, profile_name):
        s = dict(self.stats)
        accepted = s["packets"] - s["dropped"]
        s["delay_ms_mean"] = round(s.pop("delay_ms_total") / accepted, 1) if accepted else 0.0
        s["delay_ms_max"] = round(s["delay_ms_max"], 1)
        s["profile"] = profile_name
        return s


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="link-conditioner", description=__doc__.split("\n\n")[0],
        epilog="profiles: " + "; ".join("%s: %s" % (n, p.note) for n, p in PROFILES.items()))
    ap.add_argument("--interface", required=True, help="the interface facing the link, e.g. eth1")
    ap.add_argument("--profile", required=True, choices=sorted(PROFILES))
    ap.add_argument("--netns", help="run in this network namespace (ip netns name)")
    ap.add_argument("--queue", type=int, default=29, help="NFQUEUE number (default 29; one per conditioner)")
    ap.add_argument("--seed", type=int, default=None, help="random seed, to repeat a run")
    ap.add_argument("--duration", type=float, default=None, help="seconds, then exit (default: until a signal)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        ap.error("needs root (nftables, NFQUEUE)")
    if args.netns:   # again, inside it (Debian 12's Python has no os.setns)
        rest = ["--interface", args.interface, "--profile", args.profile, "--queue", str(args.queue)]
        rest += ["--seed", str(args.seed)] if args.seed is not None else []
        rest += ["--duration", str(args.duration)] if args.duration is not None else []
        os.execvp("ip", ["ip", "netns", "exec", args.netns, sys.executable, os.path.abspath(__file__)] + rest)
    if not os.path.exists("/sys/class/net/%s" % args.interface):
        ap.error("no interface %r in this network namespace" % args.interface)

    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    deadline = time.monotonic() + args.duration if args.duration else None
    profile = PROFILES[args.profile]
    conditioner = Conditioner(profile, args.seed)
    queue = Queue(args.queue, conditioner.on_packet)
    try:
        install(args.interface, args.queue)
        print("link-conditioner: %s on %s (queue %d): %s" % (args.profile, args.interface, args.queue, profile.note),
              file=sys.stderr, flush=True)
        conditioner.run(queue, lambda: stopping or (deadline is not None and time.monotonic() >= deadline))
    finally:
        remove(args.queue)
        queue.close()
    print(json.dumps(conditioner.summary(args.profile)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
