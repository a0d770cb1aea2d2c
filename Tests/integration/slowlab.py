"""The lab's slow link 1 (issue 29), for test_slow_links.py and the benchmark's slow-links row:
the conditioner on the router's interface to link 1, and service types the router has
never heard of, so that a query really crosses the conditioned link."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time

import dns.name
import dns.rdatatype

import conditioner as C
import dso
import lab as L
from helpers import name, rrset, unique

HERE = os.path.dirname(os.path.abspath(__file__))


@contextlib.contextmanager
def conditioned(lab, profile, seed=1, interface=L.R_IF1):
    """The router's `interface` under `profile` for the body; yields the conditioner's summary
    (a dict), filled when the body ends."""
    log = os.path.join(lab.dir, "conditioner.log")
    start = os.path.getsize(log) if os.path.exists(log) else 0   # the log is appended to, run after run
    proc = lab.spawn(L.NS_R, [sys.executable, os.path.join(HERE, "conditioner.py"), "--interface", interface,
                              "--profile", profile, "--seed", str(seed)],
                     "conditioner", stdout=subprocess.PIPE)
    summary = {}

    def installed():
        with open(log, "rb") as f:
            f.seek(start)
            return ("link-conditioner: %s on" % profile).encode() in f.read()

    try:
        L.wait_for(installed, 10, what="the conditioner to install its rules")
        yield summary
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=15)
        lab.stop_proc("conditioner")
        if out.strip():
            summary.update(json.loads(out))


def publish(lab, spec):
    """Publish `spec` (responder.py's JSON) on link 1; the key to unpublish it with."""
    return lab.responder_cmd("publish " + json.dumps(spec)).strip().split(" ", 2)[2]


@contextlib.contextmanager
def fresh_type(lab, count=3, prefix="sl"):
    """`count` instances of a new service type on link 1 (the lab's zeroconf responder),
    published while the router drops mDNS from link 1, so that its avahi-daemon caches none of
    their announcements. Yields (type label, instance names in zone 1); withdraws them after."""
    stype = "_" + unique(prefix)[:13]
    keys = []
    block = ["INPUT", "-i", L.R_IF1, "-p", "udp", "--sport", "5353", "-j", "DROP"]
    for ipt in C.IPTABLES:
        L.nsrun(L.NS_R, [ipt, "-I"] + block)
    try:
        for k in range(count):
            spec = {"name": "Slow %d" % k, "type": stype + "._tcp", "port": 9100 + k, "txt": ["k=%d" % k]}
            keys.append(publish(lab, spec))
        time.sleep(3.0)   # python-zeroconf's announcements (three, 1 s apart) are over
    finally:
        for ipt in C.IPTABLES:
            L.nsrun(L.NS_R, [ipt, "-D"] + block, check=False)
    try:
        yield stype, {name("Slow %d" % k, stype, "_tcp") for k in range(count)}
    finally:
        for key in keys:
            lab.responder_cmd("unpublish " + key)


@contextlib.contextmanager
def avahi_reference(lab, stype, seconds=5.0):
    """The issue's reference: the instances of `stype` (a "_x" label under _tcp) that
    `avahi-browse` on the router lists within `seconds` of entering the block. Yields a set of
    names in zone 1, filled when the block ends (which waits out the `seconds`)."""
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.dbus_addr)
    proc = subprocess.Popen(["ip", "netns", "exec", L.NS_R, "stdbuf", "-oL", "avahi-browse", "-p", stype + "._tcp"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    t0 = time.monotonic()
    listed = set()
    try:
        yield listed
        time.sleep(max(0.0, t0 + seconds - time.monotonic()))
    finally:
        proc.terminate()
        proc.wait(5)
        reader.join(5)
        proc.stdout.close()
    for line in lines:
        fields = line.rstrip("\n").split(";")
        if len(fields) >= 4 and fields[0] == "+":
            listed.add(name(L.avahi_unescape(fields[3]), stype, "_tcp"))


def negative_ttl(r, zone=L.ZONE1):
    """RFC 2308 §5: a negative answer is cached for min(SOA TTL, SOA MINIMUM)."""
    soa = rrset(r, zone, dns.rdatatype.SOA, section="authority")
    assert soa is not None, "a negative answer without the zone's SOA:\n%s" % r
    return min(soa.ttl, soa[0].minimum)


def answer_ttl(r, listed):
    """How long a resolver keeps this answer: the PTR set's TTL, or the negative TTL."""
    return min(rs.ttl for rs in r.answer) if listed else negative_ttl(r)


def _timed(client, command, want):
    """Runs `command` in a thread and waits for the PUSH change `want`: (seconds from the
    command's start to that PUSH or None after 15 s, the command's result)."""
    result = {}
    thread = threading.Thread(target=lambda: result.update(reply=command()))
    t0 = time.monotonic()
    thread.start()
    try:
        client.push_changes(15, want)
        seconds = time.monotonic() - t0
    except TimeoutError:
        seconds = None
    thread.join(30)
    return seconds, result.get("reply", "")


def push_latency(lab, port, profile, seed=1):
    """(seconds to the PUSH add, seconds to the PUSH removal) of an instance published on the
    conditioned link 1 while a DNS Push subscriber (DSO on the proxy's plain TCP `port`,
    push.on-tcp) waits; None for one that did not come within 15 s. Both run from the
    responder's command, so they include python-zeroconf's probing and avahi-daemon acting on
    a goodbye 1 s later (RFC 6762 §10.1)."""
    with fresh_type(lab, 1, prefix="sp") as (stype, _instances), conditioned(lab, profile, seed=seed):
        ptr = name(stype, "_tcp")
        late = dns.name.Name((b"Late",) + ptr.labels)
        c = dso.Client(port, tls=False)
        try:
            c.establish()
            r = c.request(dso.message(2, dso.subscribe_tlv(ptr, dns.rdatatype.PTR)))
            assert r.rcode == dso.NOERROR, r.rcode
            c.push_changes(15, lambda ch: ch[4] is not None)   # what the link has: the fresh instance
            spec = {"name": "Late", "type": stype + "._tcp", "port": 9200, "txt": ["late=1"]}
            # The responder's command returns after zeroconf's announcements, later than the
            # PUSH may come: it runs beside the subscriber, which timestamps each PUSH as read.
            added, key = _timed(c, lambda: publish(lab, spec),
                                lambda ch: ch[3] != dso.REMOVE_ONE and ch[4] is not None and ch[4].target == late)
            removed, _ = _timed(c, lambda: lab.responder_cmd("unpublish " + key),
                                lambda ch: ch[3] == dso.REMOVE_ONE and ch[4] is not None and ch[4].target == late)
            return added, removed
        finally:
            c.close()


def iptables_rules():
    return "".join(L.nsrun(L.NS_R, [ipt, "-S"]).stdout for ipt in C.IPTABLES)
