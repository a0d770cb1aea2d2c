"""Single-query probes in the router namespace: timed dnspython queries, warming,
avahi-browse's first result, held TCP connections, the proxy's RSS and metrics."""

from __future__ import annotations

import contextlib
import os
import re
import select
import socket
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import dns.exception
import dns.message
import dns.query

import lab


def ask(name, rtype, port, timeout=8.0, tcp=False):
    """One query from the router namespace; returns (response or None, seconds)."""
    q = dns.message.make_query(name, rtype, use_edns=0, payload=1232)
    with lab.netns(lab.NS_R):
        start = time.perf_counter()
        try:
            if tcp:
                r = dns.query.tcp(q, lab.PROXY_ADDR, port=port, timeout=timeout)
            else:
                r = dns.query.udp(q, lab.PROXY_ADDR, port=port, timeout=timeout)
        except dns.exception.Timeout:
            r = None
        return r, time.perf_counter() - start


def drain(port, zone, limit=600.0):
    """Wait until the proxy answers an apex SOA (an immediate answer) within 20 ms, i.e.
    it has worked off the queries a load run left queued; returns the seconds waited.
    Without this, a slow run's backlog would be measured by the next row."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        r, secs = ask(zone, "SOA", port, timeout=2.0)
        if r is not None and secs < 0.02:
            return time.monotonic() - start
        time.sleep(0.2)
    raise RuntimeError("the proxy on port %d still had a backlog after %.0f s" % (port, limit))


def warm(queries, port, workers=16, passes=6, log=print):
    """Ask every (name, type) until each has an answer (a miss joins a browse; repeats
    are hits). Returns the queries still unanswered after `passes` passes."""
    todo = list(dict.fromkeys(queries))
    for n in range(passes):
        with ThreadPoolExecutor(workers) as ex:
            results = list(ex.map(lambda q: ask(q[0], q[1], port, tcp=q[1] == "PTR"), todo))
        todo = [q for q, (r, _s) in zip(todo, results) if r is None or not r.answer]
        log("    warm pass %d: %d of %d unanswered" % (n + 1, len(todo), len(results)))
        if not todo:
            break
        time.sleep(1.0)
    return todo


def metrics(admin_port):
    """The proxy's Prometheus text from its admin endpoint (in the router namespace)."""
    with lab.netns(lab.NS_R):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % admin_port, timeout=5) as r:
            return r.read().decode()


def answer_counts(admin_port):
    """dns_answer_duration_seconds_count by cache label (hit, miss, optimistic, ...)."""
    out = {}
    pat = r'^dns_answer_duration_seconds_count\{[^}]*cache="([a-z]+)"[^}]*\}\s+([\d.e+]+)'
    for m in re.finditer(pat, metrics(admin_port), re.MULTILINE):
        out[m.group(1)] = out.get(m.group(1), 0) + int(float(m.group(2)))
    return out


def metric_sum(admin_port, name):
    """The sum of every sample of `name` (all label sets) on the proxy's /metrics."""
    pat = r'^%s(?:\{[^}]*\})?\s+([\d.e+-]+)' % re.escape(name)
    return sum(float(m.group(1)) for m in re.finditer(pat, metrics(admin_port), re.MULTILINE))


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


def avahi_first(lab_, stype, timeout=8.0, cache_only=False):
    """Seconds from starting `avahi-browse -p` in the router namespace to its first
    instance line for `stype` (None if none within `timeout`)."""
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab_.dbus_addr)
    cmd = ["ip", "netns", "exec", lab.NS_R, "stdbuf", "-oL", "avahi-browse", "-p"]
    cmd += ["-c"] if cache_only else []
    start = time.perf_counter()
    p = subprocess.Popen(cmd + [stype], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        deadline = start + timeout
        buf = b""
        while time.perf_counter() < deadline:
            ready, _w, _x = select.select([p.stdout], [], [], max(0.0, deadline - time.perf_counter()))
            if not ready:
                break
            chunk = os.read(p.stdout.fileno(), 4096)
            if not chunk:
                break
            buf += chunk
            if any(line.startswith(b"+;") for line in buf.split(b"\n")):
                return time.perf_counter() - start
        return None
    finally:
        lab.kill_pid(p.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(3)
        p.stdout.close()


class HeldTCP:
    """`count` TCP connections to the proxy, opened in the router namespace and kept open
    (each sends one query, so the proxy has seen traffic on it) until close()."""

    def __init__(self, port, count, name, rtype="PTR"):
        self.socks = []
        wire = dns.message.make_query(name, rtype).to_wire()
        framed = len(wire).to_bytes(2, "big") + wire
        with lab.netns(lab.NS_R):
            for _ in range(count):
                s = socket.create_connection((lab.PROXY_ADDR, port), timeout=5)
                s.sendall(framed)
                self.socks.append(s)
        self.answered = 0
        for s in self.socks:
            with contextlib.suppress(OSError):
                if len(s.recv(2)) == 2:
                    self.answered += 1

    def established(self, port):
        out = lab.nsrun(lab.NS_R, ["ss", "-Htn", "state", "established",
                                   "( sport = :%d )" % port]).stdout
        return len([line for line in out.splitlines() if line.strip()])

    def close(self):
        for s in self.socks:
            with contextlib.suppress(OSError):
                s.close()
        self.socks = []
