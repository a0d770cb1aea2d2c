#!/usr/bin/python3
"""Soak test (issue 5): steady mixed UDP/TCP load on the proxy in the namespace lab while
services appear and disappear on a far link, every answer checked against what is published.

    sudo bash scripts/soak.sh --minutes 30        # the wrapper builds and picks a lab id
    DISCOVERY_PROXY_BIN=.build/debug/discovery-proxy DPT_LAB_ID=soak \\
        /usr/bin/python3 scripts/soak.py --minutes 2

The lab (Tests/integration/lab.py) runs the proxy in dpt-r with its two far links. The lab's
python-zeroconf responder on link 1 publishes and withdraws `Soak NN._soak._tcp` instances
(a pool of --pool, about half up at a time, one toggled every --churn seconds, with goodbyes);
every re-publication gets a new generation, carried in the SRV port and the TXT, so a stale
answer is caught. Queries go at --rate per second (bounded: rate x duration in all), 40%
browse PTR, 25% SRV, 20% TXT of a random pool instance, 15% static services of both links;
half over UDP (a TC answer is retried over TCP), half over TCP.

Checks, for every answer: NOERROR; every TTL <= 10 and no `.local` name (RFC 8766 §5.5,
§5.5.1); and against the ground truth at that moment. An instance that changed within
WINDOW seconds before the query was sent (10 s TTL + mDNS propagation slack: goodbyes are
acted on 1 s later, RFC 6762 §10.1) may be present or absent; otherwise it must be exactly
as published: listed in the browse or not, SRV port/target and TXT of its current generation,
or a negative answer (NOERROR, no data, RFC 8766 §5.6). An optimistic answer (every TTL <= 2,
a released browse's last results, ARCHITECTURE "Life of a browse") may be stale but must be
a generation that was once published. Timeouts, SERVFAIL and connection errors count as
errors, not wrong answers.

Resident memory (VmRSS of the proxy) is sampled every --sample seconds (10); growth is the last
sample over the first one after --warmup seconds, and the slope (KiB per minute) is the
least-squares line through the samples after the warm-up: the figure for a leak, as one sample
can land on a heap's growth step. Exit status 1 when an answer was wrong, the proxy died,
errors exceed --max-error-pct, nothing was checked, or RSS grew more than --max-rss-growth
percent (0 = report only).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.client
import json
import os
import random
import socket
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Tests", "integration"))

import dns.flags  # noqa: E402
import dns.rcode  # noqa: E402
import dns.rdatatype as T  # noqa: E402

import lab as L  # noqa: E402
import soak_wire  # noqa: E402
from helpers import ZONE1, ZONE2, make_query, name, rrset  # noqa: E402

WINDOW = 15.0           # seconds: 10 s TTL + 5 s mDNS slack
OPTIMISTIC_TTL = 2
STYPE = "_soak._tcp"
SOAK_PTR = name("_soak", "_tcp")
ZC_TARGET = name(L.ZC_HOST)
STATIC = {
    # (qname, qtype) -> exact PTR targets that are published for the whole run
    (name("_ipp", "_tcp"), T.PTR): {name(n, "_ipp", "_tcp") for n in
                                    ("Printer One", "Printer Plain", "Dot.ted Printer", "Drucker K\u00fcche")},
    (name("_ipp", "_tcp", zone=ZONE2), T.PTR): {name("Printer Two", "_ipp", "_tcp", zone=ZONE2)},
}


def inst_label(i):
    return "Soak %02d" % i


@functools.lru_cache(maxsize=None)
def inst_name(i):
    """The instance's DNS name in the proxy's zone (parsed once: the generator's CPU is the limit)."""
    return name(inst_label(i), "_soak", "_tcp")


def port_of(i, gen):
    return 20000 + i * 100 + gen % 100


class Truth:
    """What the far link publishes, and when it changed."""

    def __init__(self, pool, window):
        self.lock = threading.Lock()
        self.pool = pool
        self.window = window
        self.state = {i: (False, 0) for i in range(pool)}     # i -> (published, generation)
        self.changes = {i: [] for i in range(pool)}             # i -> [(t_start, t_end)]
        self.generations = {i: set() for i in range(pool)}      # every generation ever up

    def begin(self, i, publishing=None):
        """A change starts; `publishing` is the generation about to go up (it may be seen
        before the responder confirms)."""
        with self.lock:
            self.changes[i].append([time.monotonic(), None])
            if publishing is not None:
                self.generations[i].add(publishing)

    def end(self, i, published, gen):
        with self.lock:
            self.changes[i][-1][1] = time.monotonic()
            self.state[i] = (published, gen)

    def judge(self, i, t_sent):
        """(published, generation) if the instance is settled at t_sent, else None."""
        with self.lock:
            if self.changes[i]:
                _start, end = self.changes[i][-1]
                if end is None or end > t_sent - self.window:
                    return None
            return self.state[i]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.checked = self.wrong = self.errors = self.ambiguous = self.optimistic = 0
        self.by_transport = {"udp": 0, "tcp": 0}
        self.truncated = 0
        self.wrong_samples = []
        self.error_kinds = {}

    def error(self, kind):
        with self.lock:
            self.errors += 1
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1

    def bad(self, what):
        with self.lock:
            self.wrong += 1
            if len(self.wrong_samples) < 20:
                self.wrong_samples.append(what)


def rss_parts_kib(pid):
    """VmRSS and its parts (RssAnon: heap and stacks; RssFile: the executable's and the
    libraries' pages), in KiB. Growth in RssFile is code or data first touched late, bounded
    by the files' size; growth in RssAnon is what a leak looks like."""
    parts = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key = line.split(":", 1)[0]
            if key in ("VmRSS", "RssAnon", "RssFile"):
                parts[key] = int(line.split()[1])
    return parts


# Connections at once: below the proxy's tcp.max-connections-per-client, or its refusals
# (closed connections) would count as errors.
TCP_AT_ONCE = 32
TIMEOUT = 8.0
_tcp_slots = None


class BadResponse(Exception):
    """An answer that does not match its query (an error, like a timeout)."""


@functools.lru_cache(maxsize=None)
def query_wire(qname, qtype):
    return make_query(qname, qtype).to_wire()


async def exchange(qname, qtype, tcp):
    """One query to the proxy in its own socket; the response's wire bytes."""
    global _tcp_slots
    wire = random.getrandbits(16).to_bytes(2, "big") + query_wire(qname, qtype)[2:]
    if tcp:
        _tcp_slots = _tcp_slots or asyncio.Semaphore(TCP_AT_ONCE)
        async with _tcp_slots:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(L.PROXY_ADDR, L.PROXY_PORT), TIMEOUT)
            try:
                writer.write(len(wire).to_bytes(2, "big") + wire)
                size = int.from_bytes(await asyncio.wait_for(reader.readexactly(2), TIMEOUT), "big")
                response = await asyncio.wait_for(reader.readexactly(size), TIMEOUT)
            finally:
                writer.close()
        if response[:2] != wire[:2]:
            raise BadResponse("TCP answer with another ID")
        return response
    loop = asyncio.get_running_loop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, (L.PROXY_ADDR, L.PROXY_PORT))
        await loop.sock_sendall(sock, wire)
        deadline = loop.time() + TIMEOUT
        while True:   # a stray datagram is not the answer: wait on (dns.query's ignore_unexpected)
            response = await asyncio.wait_for(loop.sock_recv(sock, 65535), max(0.0, deadline - loop.time()))
            if response[:2] == wire[:2]:
                return response


async def ask(qname, qtype, tcp, stats):
    """One query; UDP answers with TC are retried over TCP. Returns (wire, sent time)."""
    t0 = time.monotonic()
    wire = await exchange(qname, qtype, tcp)
    with stats.lock:
        stats.by_transport["tcp" if tcp else "udp"] += 1
    if not tcp and wire[2] & 0x02:
        with stats.lock:
            stats.truncated += 1
            stats.by_transport["tcp"] += 1
        wire = await exchange(qname, qtype, True)
    return wire, t0


async def one_query(rng_seed, truth, stats):
    rng = random.Random(rng_seed)
    tcp = rng.random() < 0.5
    pick = rng.random()
    try:
        if pick < 0.40:
            await check_browse(tcp, truth, stats)
        elif pick < 0.85:
            await check_instance(rng.randrange(truth.pool), T.SRV if pick < 0.65 else T.TXT, tcp, truth, stats)
        else:
            (qname, qtype), want = rng.choice(sorted(STATIC.items(), key=lambda kv: str(kv[0])))
            wire, _t0 = await ask(qname, qtype, tcp, stats)
            r = sane(wire, qname, qtype, stats)
            if r is not None:
                got = {rd.target for rd in (rrset(r, qname, qtype) or [])}
                record(stats, got == want, "static %s: got %s" % (qname, sorted(map(str, got))))
    except Exception as e:  # noqa: BLE001 - timeouts, resets: counted, reported by kind
        stats.error(type(e).__name__)


def sane(wire, qname, qtype, stats):
    """NOERROR, the question asked, and the invariants of every answer (soak_wire.scan): the
    header, question and answer as a message; None (counted) otherwise."""
    rcode = wire[3] & 0x0F
    if rcode == dns.rcode.SERVFAIL:
        stats.error("SERVFAIL")
        return None
    if rcode != dns.rcode.NOERROR:
        stats.bad("%s: rcode %s" % (qname, dns.rcode.to_text(rcode)))
        return None
    try:
        r = soak_wire.answer_message(wire, soak_wire.scan(wire))
    except soak_wire.Insane as e:
        stats.bad("%s: %s" % (qname, e))
        return None
    if [(q.name, q.rdtype) for q in r.question] != [(qname, qtype)]:
        stats.error("BadResponse")   # as dns.query counted an answer to another question
        return None
    return r


def record(stats, ok, what):
    with stats.lock:
        stats.checked += 1
    if not ok:
        stats.bad(what)


def is_optimistic(r):
    ttls = [rs.ttl for rs in r.answer]
    return bool(ttls) and max(ttls) <= OPTIMISTIC_TTL


async def check_browse(tcp, truth, stats):
    wire, t0 = await ask(SOAK_PTR, T.PTR, tcp, stats)
    r = sane(wire, SOAK_PTR, T.PTR, stats)
    if r is None:
        return
    got = {rd.target for rd in (rrset(r, SOAK_PTR, T.PTR) or [])}
    known = {inst_name(i): i for i in range(truth.pool)}
    strangers = got - set(known)
    ok, why = not strangers, "browse lists unknown %s" % sorted(map(str, strangers))
    optimistic = is_optimistic(r)
    for n, i in known.items():
        settled = truth.judge(i, t0)
        if settled is None or optimistic:
            with stats.lock:
                stats.ambiguous += 1
            continue
        if (n in got) != settled[0]:
            ok, why = False, "browse: %s %s, published=%s" % (n, "listed" if n in got else "missing", settled[0])
    if optimistic:
        with stats.lock:
            stats.optimistic += 1
    record(stats, ok, why)


async def check_instance(i, qtype, tcp, truth, stats):
    qname = inst_name(i)
    wire, t0 = await ask(qname, qtype, tcp, stats)
    r = sane(wire, qname, qtype, stats)
    if r is None:
        return
    rs = rrset(r, qname, qtype)
    if rs is None:
        got_gen = None
    elif qtype == T.SRV:
        rd = rs[0]
        if len(rs) != 1 or rd.target != ZC_TARGET or (rd.port - 20000) // 100 != i:
            record(stats, False, "%s SRV %s" % (qname, rs.to_text()))
            return
        got_gen = {g for g in truth.generations[i] if port_of(i, g) == rd.port}
    else:
        strings = [list(rd.strings) for rd in rs]
        if len(strings) != 1 or len(strings[0]) != 2 or strings[0][1] != b"i=%d" % i:
            record(stats, False, "%s TXT %s" % (qname, rs.to_text()))
            return
        got_gen = {int(strings[0][0].split(b"=")[1])}
    settled = truth.judge(i, t0)
    if is_optimistic(r):
        # A released browse's last results: any generation that was once published.
        with stats.lock:
            stats.optimistic += 1
        record(stats, got_gen is None or bool(got_gen & truth.generations[i]),
               "%s optimistic answer of a never-published generation" % qname)
        return
    if settled is None:
        with stats.lock:
            stats.ambiguous += 1
        record(stats, got_gen is None or bool(got_gen & truth.generations[i]),
               "%s: generation %s was never published" % (qname, got_gen))
        return
    published, gen = settled
    if published:
        record(stats, got_gen is not None and gen in got_gen,
               "%s %s: published gen %d, got %s" % (qname, T.to_text(qtype), gen, got_gen))
    else:
        record(stats, got_gen is None and not r.answer,
               "%s %s: withdrawn, got %s" % (qname, T.to_text(qtype), [x.to_text() for x in r.answer]))


def churn(lab, truth, rng, period, t_end, stop):
    gens = {i: truth.state[i][1] for i in range(truth.pool)}
    n = 0
    while not stop.is_set() and time.monotonic() < t_end:
        i = rng.randrange(truth.pool)
        up, _gen = truth.state[i]
        if up:
            truth.begin(i)
            lab.responder_cmd("unpublish %s.%s" % (inst_label(i), STYPE))
            truth.end(i, False, gens[i])
        else:
            gens[i] += 1
            truth.begin(i, publishing=gens[i])
            spec = {"name": inst_label(i), "type": STYPE, "port": port_of(i, gens[i]),
                    "txt": ["gen=%d" % gens[i], "i=%d" % i]}
            lab.responder_cmd("publish " + json.dumps(spec))
            truth.end(i, True, gens[i])
        n += 1
        stop.wait(period)
    return n


def sample_rss(pid, t, rss, rss_parts):
    """Appends VmRSS at `t` to `rss`, and its anonymous and file-backed parts to `rss_parts`."""
    parts = rss_parts_kib(pid)
    rss.append((t, parts.get("VmRSS", 0)))
    rss_parts.append((t, parts.get("RssAnon", 0), parts.get("RssFile", 0)))


async def send(lab, args, rng, truth, stats, rss, rss_parts, t_start, t_end):
    """Queries at args.rate until t_end, RSS and its parts sampled every args.sample seconds.
    Returns (sent, skipped, crashed)."""
    pid = lab.proxy.pid
    sent = skipped = 0
    inflight = set()
    next_sample = last_report = t_next = t_start
    while time.monotonic() < t_end:
        now = time.monotonic()
        if lab.proxy.poll() is not None:
            break
        if now >= next_sample:
            sample_rss(pid, round(now - t_start, 1), rss, rss_parts)
            next_sample += args.sample
        if now - last_report >= 60:
            last_report = now
            print("soak: %4.0fs checked %d wrong %d errors %d RSS %d KiB, %d in flight" % (
                now - t_start, stats.checked, stats.wrong, stats.errors, rss[-1][1], len(inflight)), flush=True)
        if now < t_next:
            await asyncio.sleep(min(t_next - now, 0.05))
            continue
        # Behind schedule (a slow proxy or generator): send what is due now, but never
        # more than 128 queries in flight; what does not fit is counted as skipped.
        while t_next <= now:
            t_next += 1.0 / args.rate
            if len(inflight) >= 128:
                skipped += 1
                continue
            task = asyncio.create_task(one_query(rng.getrandbits(32), truth, stats))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
            sent += 1
    if inflight:
        await asyncio.wait(inflight, timeout=10)
    return sent, skipped, lab.proxy.poll() is not None


def counter_balance(settle=10.0):
    """The written invariant between the counters (docs/METRICS.md, "Invariants"), read from
    /api/services once the load has stopped: every DNS message the listeners handed on was
    taken by the proxy (no DNS Push here), and every query the proxy took was answered,
    dropped or is in flight. Waits up to `settle` seconds for the last misses to be answered
    and the replays to be reported (once a second)."""
    t_end = time.monotonic() + settle
    while True:
        conn = http.client.HTTPConnection(L.PROXY_ADDR, L.PROXY_PORT + 3000, timeout=5)
        with L.netns(L.NS_R):
            conn.connect()
        try:
            conn.request("GET", "/api/services")
            status = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        proxy = status["proxy"]
        figures = {
            "received": status["udpQueriesReceived"] + status["tcpQueriesReceived"], "queries": proxy["queries"],
            "answered": proxy["answered"], "dropped": proxy["dropped"], "in_flight": proxy["inFlight"]}
        figures["balanced"] = (figures["received"] == figures["queries"]
                               == figures["answered"] + figures["dropped"] + figures["in_flight"]
                               and figures["in_flight"] == 0)
        if figures["balanced"] or time.monotonic() > t_end:
            return figures
        time.sleep(0.5)


def rss_slope(samples):
    """Least-squares slope of (seconds, KiB) samples, in KiB per minute; None with < 3 samples."""
    if len(samples) < 3:
        return None
    n = len(samples)
    mt = sum(t for t, _k in samples) / n
    mk = sum(k for _t, k in samples) / n
    var = sum((t - mt) ** 2 for t, _k in samples)
    if var == 0:
        return None
    return 60.0 * sum((t - mt) * (k - mk) for t, k in samples) / var


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=2.0)
    ap.add_argument("--rate", type=float, default=20.0, help="queries per second (default 20)")
    ap.add_argument("--pool", type=int, default=24, help="far-link instances that come and go")
    ap.add_argument("--churn", type=float, default=2.0, help="seconds between publish/withdraw")
    ap.add_argument("--warmup", type=float, default=None,
                    help="seconds before the first RSS sample that counts (default: 25%% of the run, <= 300)")
    ap.add_argument("--max-rss-growth", type=float, default=5.0, help="percent; 0 = report only")
    ap.add_argument("--max-rss-slope", type=float, default=None,
                    help="KiB per minute, either way, over the samples after the warm-up (default: not checked)")
    ap.add_argument("--sample", type=float, default=10.0, help="seconds between RSS samples (default 10)")
    ap.add_argument("--max-error-pct", type=float, default=5.0)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--window", type=float, default=WINDOW,
                    help="seconds after a change when either state is accepted (default 15)")
    ap.add_argument("--report", help="write the figures as JSON here")
    args = ap.parse_args(argv)
    duration = args.minutes * 60
    warmup = args.warmup if args.warmup is not None else min(300.0, duration * 0.25)

    lab = L.Lab()
    lab.start(with_proxy=True)
    try:
        return run(lab, args, duration, warmup)
    finally:
        lab.stop()


def run(lab, args, duration, warmup):
    rng = random.Random(args.seed)
    truth, stats = Truth(args.pool, args.window), Stats()
    pid = lab.proxy.pid
    # Half the pool up before the load starts, so browses have something to list.
    for i in range(0, args.pool, 2):
        truth.begin(i, publishing=1)
        spec = {"name": inst_label(i), "type": STYPE, "port": port_of(i, 1), "txt": ["gen=1", "i=%d" % i]}
        lab.responder_cmd("publish " + json.dumps(spec))
        truth.end(i, True, 1)

    t_start = time.monotonic()
    t_end = t_start + duration
    stop = threading.Event()
    churns = []
    churner = threading.Thread(target=lambda: churns.append(
        churn(lab, truth, random.Random(args.seed + 1), args.churn, t_end, stop)), daemon=True)
    churner.start()
    rss = []  # (seconds since start, KiB)
    rss_parts = []  # (seconds since start, RssAnon KiB, RssFile KiB)
    # One thread, one event loop inside the router's namespace: a thread per query held the
    # generator near 250 q/s on this machine (the GIL), below the issue-28 soak's 500.
    with L.netns(L.NS_R):
        sent, skipped, crashed = asyncio.run(send(lab, args, rng, truth, stats, rss, rss_parts, t_start, t_end))
    stop.set()
    churner.join(30)
    balance = None
    if lab.proxy.poll() is not None:
        crashed = True
    else:
        sample_rss(pid, round(time.monotonic() - t_start, 1), rss, rss_parts)
        balance = counter_balance()
    counted = [kib for t, kib in rss if t >= warmup] or [kib for _t, kib in rss]
    rss_start, rss_end = counted[0], counted[-1]
    growth = 100.0 * (rss_end - rss_start) / rss_start if rss_start else 0.0
    slope = rss_slope([(t, kib) for t, kib in rss if t >= warmup])
    anon_slope = rss_slope([(t, anon) for t, anon, _f in rss_parts if t >= warmup])
    file_slope = rss_slope([(t, file_) for t, _a, file_ in rss_parts if t >= warmup])
    figures = {
        "minutes": args.minutes, "rate": args.rate, "queries_sent": sent, "skipped": skipped,
        "answers_checked": stats.checked, "wrong": stats.wrong, "errors": stats.errors,
        "error_kinds": stats.error_kinds, "ambiguous_instance_checks": stats.ambiguous,
        "optimistic_answers": stats.optimistic, "udp_queries": stats.by_transport["udp"],
        "tcp_queries": stats.by_transport["tcp"], "udp_truncated_retried_tcp": stats.truncated,
        "publish_withdraw_events": churns[0] if churns else None, "proxy_crashed": crashed,
        "rss_warmup_s": warmup, "rss_start_kib": rss_start, "rss_end_kib": rss_end,
        "rss_max_kib": max(kib for _t, kib in rss), "rss_growth_pct": round(growth, 2),
        "rss_slope_kib_per_min": None if slope is None else round(slope, 3),
        "rss_samples": rss, "wrong_samples": stats.wrong_samples,
        "rss_anon_slope_kib_per_min": None if anon_slope is None else round(anon_slope, 3),
        "rss_file_slope_kib_per_min": None if file_slope is None else round(file_slope, 3),
        "rss_parts_samples": rss_parts, "counter_balance": balance,
    }
    if args.report:
        with open(args.report, "w") as f:
            json.dump(figures, f, indent=1)
    print("soak: %.1f min at %.0f q/s: %d queries (%d UDP, %d TCP, %d TC->TCP), %d answers checked, "
          "%d wrong, %d errors %s, %d ambiguous instance checks, %d optimistic, %s publish/withdraw; "
          "RSS %d -> %d KiB after %.0fs warm-up (%+.2f%%, max %d, slope %s KiB/min)" % (
              args.minutes, args.rate, sent, stats.by_transport["udp"], stats.by_transport["tcp"],
              stats.truncated, stats.checked, stats.wrong, stats.errors, stats.error_kinds,
              stats.ambiguous, stats.optimistic, figures["publish_withdraw_events"], rss_start, rss_end,
              warmup, growth, figures["rss_max_kib"], "n/a" if slope is None else "%+.2f" % slope))
    if anon_slope is not None and file_slope is not None:
        print("soak: of the slope, anonymous (heap, stacks) %+.2f KiB/min, file-backed (code, data) %+.2f KiB/min" % (
            anon_slope, file_slope))
    for w in stats.wrong_samples:
        print("  wrong: %s" % w)
    failures = []
    if crashed:
        failures.append("the proxy exited (code %s)" % lab.proxy.returncode)
        print(lab.log_text("proxy", 60))
    if stats.wrong:
        failures.append("%d wrong answers" % stats.wrong)
    if stats.checked == 0:
        failures.append("no answer was checked")
    if sent and 100.0 * stats.errors / sent > args.max_error_pct:
        failures.append("%d errors in %d queries (over %.1f%%)" % (stats.errors, sent, args.max_error_pct))
    if balance is not None and not balance["balanced"]:
        failures.append("the counters do not balance: %s" % balance)
    elif balance is not None:
        print("soak: counters balance: %(received)d received = %(queries)d taken = %(answered)d answered "
              "+ %(dropped)d dropped + %(in_flight)d in flight" % balance)
    if args.max_rss_growth > 0 and growth > args.max_rss_growth:
        failures.append("RSS grew %.2f%% (limit %.1f%%)" % (growth, args.max_rss_growth))
    if args.max_rss_slope is not None and slope is not None and abs(slope) > args.max_rss_slope:
        failures.append("RSS slope %+.2f KiB/min after the warm-up (limit +/-%.1f)" % (slope, args.max_rss_slope))
    print("soak: %s" % ("FAILED: " + "; ".join(failures) if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
