"""Bounded load helpers for the flood, abuse and fault tests: a UDP latency probe
of cached queries, a fast UDP query blaster, the proxy's RSS and its admin JSON.
Every loop here is bounded in count and in time; traffic goes only to the proxy
inside the lab's router namespace."""

from __future__ import annotations

import http.client
import json
import multiprocessing
import os
import select
import socket
import struct
import threading
import time

import dns.message
import dns.rdatatype as T

import lab as L
from helpers import name


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


class UdpProbe:
    """Sends one cached query every `interval` s (at most `max_count`, at most
    `max_seconds`) and records each latency; a lost answer counts as `timeout` s.

    It runs in its own process, so that the test's other Python threads (load
    generators) cannot delay it through the GIL. `qname` must be cached (a live
    browse) before start()."""

    def __init__(self, port=L.PROXY_PORT, qname=None, rdtype=T.PTR, interval=0.01,
                 max_count=20000, max_seconds=300.0, timeout=1.0):
        self.port, self.interval, self.timeout = port, interval, timeout
        self.qname = qname if qname is not None else name("_ipp", "_tcp")
        self.rdtype = rdtype
        self.max_count, self.max_seconds = max_count, max_seconds
        self.latencies, self.lost, self.rcodes = [], 0, {}
        ctx = multiprocessing.get_context("fork")
        self._stop = ctx.Event()
        self._results = ctx.Queue()
        self._proc = ctx.Process(target=self._run, daemon=True)

    def start(self):
        self._proc.start()
        return self

    def stop(self):
        self._stop.set()
        try:
            self.latencies, self.lost, self.rcodes = self._results.get(timeout=self.max_seconds + 10)
        finally:
            self._proc.join(5)
            if self._proc.is_alive():
                self._proc.kill()
        return self

    def _run(self):
        with L.netns(L.NS_R):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((L.PROXY_ADDR, self.port))
        q = bytearray(wire_query(self.qname, self.rdtype))
        t_end = time.monotonic() + self.max_seconds
        qid = 0
        latencies, lost, rcodes = [], 0, {}
        for _ in range(self.max_count):
            if self._stop.is_set() or time.monotonic() > t_end:
                break
            qid = (qid + 1) & 0xFFFF
            q[0:2] = struct.pack(">H", qid)
            t0 = time.monotonic()
            s.send(q)
            got = None
            while got is None:
                left = t0 + self.timeout - time.monotonic()
                if left <= 0:
                    break
                r, _w, _x = select.select([s], [], [], left)
                if not r:
                    break
                wire = s.recv(65535)
                if len(wire) >= 2 and struct.unpack(">H", wire[:2])[0] == qid:
                    got = wire
            dt = time.monotonic() - t0
            if got is None:
                lost += 1
                latencies.append(self.timeout)
            else:
                rc = got[3] & 0x0F
                rcodes[rc] = rcodes.get(rc, 0) + 1
                latencies.append(dt)
            pause = self.interval - (time.monotonic() - t0)
            if pause > 0:
                time.sleep(pause)
        s.close()
        self._results.put((latencies, lost, rcodes))

    def summary(self):
        lat = self.latencies
        return {"count": len(lat), "lost": self.lost,
                "p50_ms": round(percentile(lat, 50) * 1000, 3),
                "p99_ms": round(percentile(lat, 99) * 1000, 3),
                "max_ms": round(max(lat) * 1000, 3) if lat else None, "rcodes": self.rcodes}


def wire_query(qname, rdtype, qid=0):
    """A query without OPT, built by hand: dnspython is too slow for 100k names."""
    out = bytearray(struct.pack(">HHHHHH", qid, 0, 1, 0, 0, 0))
    for label in qname.labels:
        out.append(len(label))
        out += label
    out += struct.pack(">HH", rdtype, 1)
    return bytes(out)


def blast_udp(questions, port=L.PROXY_PORT, rate=5000.0, max_seconds=120.0,
              drain_seconds=8.0):
    """Send one query per (name, type) at about `rate`/s (bounded by `max_seconds`), reading
    replies as they come, then for `drain_seconds` more. Returns (sent, replies by
    rcode, bytes sent, bytes received)."""
    with L.netns(L.NS_R):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.connect((L.PROXY_ADDR, port))
    s.setblocking(False)
    rcodes, sent, bytes_out, bytes_in = {}, 0, 0, 0

    def drain():
        nonlocal bytes_in
        while True:
            try:
                wire = s.recv(65535)
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionRefusedError:
                continue
            bytes_in += len(wire)
            if len(wire) >= 4:
                rc = wire[3] & 0x0F
                rcodes[rc] = rcodes.get(rc, 0) + 1

    t0 = time.monotonic()
    for i, (qn, rdtype) in enumerate(questions):
        if time.monotonic() - t0 > max_seconds:
            break
        wire = wire_query(qn, rdtype, i & 0xFFFF)
        try:
            s.send(wire)
            sent += 1
            bytes_out += len(wire)
        except BlockingIOError:
            select.select([], [s], [], 0.01)
        if i % 64 == 0:
            drain()
            ahead = t0 + (i + 1) / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    t_end = time.monotonic() + drain_seconds
    while time.monotonic() < t_end:
        select.select([s], [], [], 0.2)
        drain()
    s.close()
    return sent, rcodes, bytes_out, bytes_in


def rss_kib(pid):
    """Resident set size of a process (VmRSS, KiB)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def admin_json(port, path="/api/services", timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    with L.netns(L.NS_R):
        conn.connect()
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        return r.status, (json.loads(body.decode()) if path.startswith("/api") else body.decode())
    finally:
        conn.close()


def counters(port):
    """Browses, avahi objects and mDNS queries started, from /api/services."""
    _st, j = admin_json(port)
    return {"browses": j["proxy"]["activeBrowses"], "avahi_objects": j["avahi"]["liveQueries"],
            "mdns_started": j["proxy"]["mdnsQueriesStarted"], "evicted": j["proxy"].get("browsesEvicted", 0),
            "avahi_clients": j["avahi"]["clients"], "mdns_connected": j["avahi"]["connected"]}
