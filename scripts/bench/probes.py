"""Single-query probes in the router namespace: timed dnspython queries, warming,
avahi-browse's first result (alone and paired with the proxy's), held TCP connections,
the proxy's RSS and metrics."""

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
        except dns.query.BadResponse:
            # A late answer to an earlier query that timed out, on a reused ephemeral port:
            # not this question's answer. Counted as unanswered, so a warm pass asks again.
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


def _stat(pid):
    """The fields of /proc/PID/stat after the command name (which may hold spaces and
    parentheses): [0] is field 3 of proc(5), the state."""
    with open("/proc/%s/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid):
    """User + system CPU time of a process so far (/proc/PID/stat, clock ticks)."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(pids, busy=0.05, limit=45.0, window=1.0):
    """Waits until every process in `pids` used under `busy` of a core over `window` seconds
    (at most `limit` seconds); returns the seconds waited. New browses make avahi-daemon
    query at 1, 2, 4, ... s (RFC 6762 §5.2) and the far responder answer: on a 2-core machine
    that traffic would be measured as the proxy's slowness."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        before = {p: cpu_seconds(p) for p in pids}
        time.sleep(window)
        if all(cpu_seconds(p) - before[p] < busy * window for p in pids):
            break
    return time.monotonic() - start


def port_owners(lab_, port):
    """Pids of the processes holding UDP `port` in the router namespace (NSD: parent and server)."""
    r = lab.nsrun(lab.NS_R, ["ss", "-Hulpn", "sport = :%d" % port], check=False)
    return sorted({int(m) for m in re.findall(r"pid=(\d+)", r.stdout)})


class Pinned:
    """Pins every thread of `pids` to `cpus` for a `with` block (and with `nice`, lowers their
    priority to it), then lets them run anywhere again at their own priority. The latency row
    pins the server under test and dnsperf to different CPUs, so that on a 2-core machine
    neither's scheduling is counted as the other's latency."""

    def __init__(self, pids, cpus, nice=None):
        self.pids, self.cpus, self.nice = pids, set(cpus), nice
        self.saved_nice = {}

    def _tids(self):
        for pid in self.pids:
            try:
                tids = os.listdir("/proc/%d/task" % pid)
            except FileNotFoundError:
                continue
            yield from (int(tid) for tid in tids)

    def _set(self, cpus, renice):
        for tid in self._tids():
            try:
                os.sched_setaffinity(tid, cpus)
                if renice:
                    self.saved_nice.setdefault(tid, os.getpriority(os.PRIO_PROCESS, tid))
                    os.setpriority(os.PRIO_PROCESS, tid, self.nice)
                elif tid in self.saved_nice:
                    os.setpriority(os.PRIO_PROCESS, tid, self.saved_nice[tid])
            except (ProcessLookupError, OSError):
                pass  # a thread that ended meanwhile

    def __enter__(self):
        self._set(self.cpus, self.nice is not None)
        return self

    def __exit__(self, *exc):
        self._set(set(range(os.cpu_count() or 1)), False)
        return False


def lab_processes(lab_):
    """Pids of every process the lab started and their descendants: each runs in its own
    session (`Lab.spawn`), so every process whose session is one of theirs."""
    sessions = {p.pid for p in lab_.procs.values() if p.poll() is None}
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = _stat(entry)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[3]) in sessions:  # field 6 of proc(5): the session id
            pids.append(int(entry))
    return pids


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for pid %d" % pid)


def avahi_first(lab_, stype, timeout=8.0, cache_only=False):
    """Seconds from starting `avahi-browse -p` in the router namespace to its first
    instance line for `stype` (None if none within `timeout`)."""
    start = time.perf_counter()
    p = _avahi_browse(lab_, stype, cache_only)
    try:
        line = _first_instance_line(p, start + timeout)
        return None if line is None else line - start
    finally:
        _stop(p)


def paired_first(lab_, stype, qname, port, startup, timeout=8.0):
    """A fresh type asked of avahi-browse and of the proxy together: `avahi-browse -p stype`
    starts at t_a, the proxy's PTR query for `qname` goes out (from a thread, while this one
    reads avahi-browse) at t_q = t_a + `startup`, when avahi-browse's browser exists. Both
    browsers have the same key, so avahi-daemon sends one mDNS query for them and both
    see the same first response: the mDNS timing (RFC 6762 §5.2 query deferral, §6
    responder delay) is common to the pair and cancels out of proxy - avahi.
    Returns (avahi, proxy, lag) in seconds: avahi = first instance line - t_a - startup,
    proxy = answer - t_q (each None without a line / an answer with records within
    `timeout`), lag = t_q - t_a - startup (how late the query went out)."""
    def query():
        time.sleep(max(0.0, start + startup - time.perf_counter()))
        sent = time.perf_counter()
        r, secs = ask(qname, "PTR", port, timeout=timeout)
        return sent, (secs if r is not None and r.answer else None)

    start = time.perf_counter()
    p = _avahi_browse(lab_, stype, cache_only=False)
    try:
        with ThreadPoolExecutor(1) as ex:
            proxy = ex.submit(query)
            line = _first_instance_line(p, start + timeout)
            sent, proxy_s = proxy.result()
    finally:
        _stop(p)
    avahi_s = None if line is None else line - start - startup
    return avahi_s, proxy_s, sent - start - startup


def _avahi_browse(lab_, stype, cache_only):
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab_.dbus_addr)
    cmd = ["ip", "netns", "exec", lab.NS_R, "stdbuf", "-oL", "avahi-browse", "-p"]
    cmd += ["-c"] if cache_only else []
    return subprocess.Popen(cmd + [stype], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)


def _first_instance_line(p, deadline):
    """time.perf_counter() when avahi-browse printed its first instance ("+;...") line,
    None if it printed none before `deadline` (or exited)."""
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
            return time.perf_counter()
    return None


def _stop(p):
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
