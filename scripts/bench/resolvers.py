"""Row g (issue 15): DNS-SD answers through real recursive resolvers, and the resolvers'
patience with a negative answer.

The resolver lab (Tests/integration/resolver_lab.py) adds a client namespace with a parent
zone on knotd that delegates lab1/lab2.example. to a proxy on 203.0.113.1:53, and one
recursive resolver at a time (Unbound, BIND, Knot Resolver, PowerDNS Recursor, dnsmasq) on
127.0.0.1:53 there. The client sends ONE query with RD to the resolver and waits 5 s
(glibc's default `timeout:5`), as a DNS-SD client's stub does on its first try.

* `run(run_)` is the benchmark row "resolvers": per resolver, the time from the client's
  query to the resolver's answer for present types (fresh for the proxy, published on link 2
  by the bench responder) and for absent types (NOERROR/NODATA after the proxy's
  negative timeout), beside avahi-browse's first result for fresh types of the same kind.
* `python3 scripts/bench/resolvers.py --patience` (root) is the sweep behind the default
  `negative-timeout`: for each resolver and each negative timeout D, a cold resolver gets
  one query for an absent type; the table says what the client got and when, and what the
  resolver sent the proxy meanwhile (retries, their times and source ports).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "Tests", "integration"))
sys.path.insert(0, HERE)

import dns.exception  # noqa: E402
import dns.flags  # noqa: E402
import dns.message  # noqa: E402
import dns.rcode  # noqa: E402
import dns.rdatatype  # noqa: E402

import lab as L  # noqa: E402
import resolver_lab as RL  # noqa: E402

CLIENT_WAIT = 5.0          # glibc resolv.conf `timeout:` default
ABSENT_TARGET_S = 1.0
def start_proxy(rl, binary=None, negative_timeout=None, log_level="notice"):
    """(Re)start the resolver lab's proxy (proxy-rl) with this binary and, optionally,
    another --negative-timeout."""
    args = [] if negative_timeout is None else ["--negative-timeout", "%g" % negative_timeout]
    rl.restart_proxy(args, binary=binary, log_level=log_level)


def client_query(rl, qname, rdtype="PTR", timeout=CLIENT_WAIT):
    """One query from the client; returns (outcome, seconds, response or None) where outcome
    is "answer" (NOERROR with records), "nodata" (NOERROR, none), an rcode name, or "none"."""
    start = time.perf_counter()
    try:
        r = rl.query(qname, rdtype, timeout=timeout)
    except dns.exception.Timeout:
        return "none", time.perf_counter() - start, None
    secs = time.perf_counter() - start
    rc = r.rcode()
    if rc == dns.rcode.NOERROR:
        want = dns.rdatatype.from_text(rdtype)
        return ("answer" if any(rr.rdtype == want for rr in r.answer) else "nodata"), secs, r
    return dns.rcode.to_text(rc), secs, r


def fresh_absent(tag):
    """An absent service type's PTR name nobody has asked before (service names <= 15 chars)."""
    return "_n%s%05x._tcp.%s" % (tag, random.getrandbits(20), L.ZONE1)


# --------------------------------------------------------------------------- patience sweep
def patience_point(rl, kind, d, tag, warm=0):
    """A cold `kind`, one client query for an absent type; the outcome and what the
    resolver sent the proxy (waits until the proxy's answer to the last query is in).
    With `warm`, that many queries the proxy answers at once go first (fresh names, A at a
    service type's position): the resolver has measured the proxy's round trip, as a site's
    resolver in use has, and some (Unbound) time out and re-send sooner then."""
    rl.start_resolver(kind)
    for i in range(warm):
        client_query(rl, "_w%s%02d%03x._tcp.%s" % (tag, i, random.getrandbits(12), L.ZONE1), "A")
    qname = fresh_absent(tag)
    wall0 = time.time()
    t0 = time.monotonic()
    outcome, secs, _r = client_query(rl, qname)
    second = None
    if outcome not in ("nodata", "answer"):
        # glibc (attempts:2) tries once more; what would that second try get?
        o2, s2, _r2 = client_query(rl, qname)
        second = dict(outcome=o2, seconds=round(s2, 3))
    # every query the resolver sent is answered by d after the first: wait for that, and for
    # a late reply to the client
    time.sleep(max(0.5, t0 + d + 0.8 - time.monotonic()))
    packets = rl.packets(wall0)
    ex = RL.proxy_exchanges(packets, qname, wall0)
    replies = client_replies(packets, qname, wall0)
    rl.stop_resolver()
    return dict(kind=kind, d=d, qname=qname, outcome=outcome, seconds=round(secs, 3), second=second,
                sent=[dict(x, t=round(x["t"], 3), answered_after=None if x["answered_after"] is None
                           else round(x["answered_after"], 3)) for x in ex],
                replies=replies)


def client_replies(packets, qname, since):
    """The resolver's replies to the client's queries on loopback (also those after the client
    stopped waiting): [(n, t, rcode text)] for the client's n-th query (1, 2), t relative to
    since; NODATA for NOERROR without answers."""
    qname = qname.lower().rstrip(".") + "."
    ports, out, seen = [], [], set()
    for ts, src, sport, dst, dport, msg in packets:
        if ts < since or not msg.question or msg.question[0].name.to_text().lower() != qname:
            continue
        if dst == RL.RESOLVER_ADDR and dport == 53 and not msg.flags & dns.flags.QR:
            if sport not in ports:
                ports.append(sport)
        elif src == RL.RESOLVER_ADDR and sport == 53 and msg.flags & dns.flags.QR and dport in ports:
            if (dport, msg.id) in seen:  # -i any: a loopback packet twice
                continue
            seen.add((dport, msg.id))
            rc = msg.rcode()
            text = ("NODATA" if not msg.answer else "NOERROR") if rc == dns.rcode.NOERROR else dns.rcode.to_text(rc)
            out.append((ports.index(dport) + 1, round(ts - since, 3), text))
    return out


def describe_sent(sent):
    """'PTR x3 at 0, 0.38, 1.13 s; 3 ports' (the final query's type only, its probes apart)."""
    ptr = [x for x in sent if x["type"] == "PTR"]
    if not ptr:
        return "no PTR query reached the proxy"
    ports = len({(x["src"], x["sport"]) for x in ptr})
    base = ptr[0]["t"]
    return "PTR x%d at %s s; %d src port%s" % (
        len(ptr), ", ".join("%.2f" % (x["t"] - base) for x in ptr), ports, "" if ports == 1 else "s")


def patience(argv):
    ap = argparse.ArgumentParser(prog="resolvers.py --patience")
    ap.add_argument("--patience", action="store_true")
    ap.add_argument("--proxy-bin", default=os.path.join(REPO, ".build", "debug", "discovery-proxy"))
    ap.add_argument("--timeouts", default="0.4,0.6,0.8,1.0,1.2,1.5,2.0,3.0,4.5,6.0")
    ap.add_argument("--resolvers", default=",".join(RL.RESOLVERS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--warm", type=int, default=0,
                    help="first send this many queries the proxy answers at once (a resolver in use)")
    args = ap.parse_args(argv)
    timeouts = [float(x) for x in args.timeouts.split(",")]
    kinds = [k for k in args.resolvers.split(",") if RL.installed(k)]
    lab_ = L.Lab()
    results = []
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    try:
        lab_.start(with_proxy=False)
        rl = RL.ResolverLab(lab_)
        os.environ.setdefault("DISCOVERY_PROXY_BIN", os.path.abspath(args.proxy_bin))
        rl.start()
        for rep in range(args.repeat):
            for d in timeouts:
                start_proxy(rl, os.path.abspath(args.proxy_bin), negative_timeout=d)
                for kind in kinds:
                    res = patience_point(rl, kind, d, "%x" % rep, warm=args.warm)
                    res["rep"], res["warm"] = rep, args.warm
                    results.append(res)
                    print("[%6.1fs] %-8s D=%-4g rep %d: %-8s %.3f s%s; %s" % (
                        time.monotonic() - started, kind, d, rep, res["outcome"], res["seconds"],
                        "" if not res["second"] else " (2nd try: %s %.3f s)" % (
                            res["second"]["outcome"], res["second"]["seconds"]),
                        describe_sent(res["sent"])) + "; replies to client: %s" % (
                        ", ".join("#%d %s at %.2f" % (n, rc, t) for n, t, rc in res["replies"]) or "none"), flush=True)
                    if args.json:
                        with open(args.json, "w") as f:
                            json.dump(results, f, indent=1)
        rl.stop()
    finally:
        lab_.stop()
    print()
    print(patience_table(results, kinds, timeouts))
    return 0


def patience_table(results, kinds, timeouts):
    """resolver x D: outcome (seconds) per repetition."""
    short = {"nodata": "N", "answer": "A", "SERVFAIL": "SF", "none": "-"}
    lines = ["D (s)  " + "  ".join("%-24s" % k for k in kinds)]
    for d in timeouts:
        cells = []
        for k in kinds:
            rs = [r for r in results if r["kind"] == k and r["d"] == d]
            cells.append(" ".join("%s%.2f" % (short.get(r["outcome"], r["outcome"]), r["seconds"])
                                  for r in rs))
        lines.append("%-6g " % d + "  ".join("%-24s" % c for c in cells))
    return "\n".join(lines)


# --------------------------------------------------------------------------- bench row
def collection_window_ms(binary):
    out = L.nsrun(L.NS_R, [binary, "--link", "%s=%s" % (L.R_IF1, L.ZONE1), "--link",
                           "%s=%s" % (L.R_IF2, L.ZONE2), "--server-name", L.SERVER_NAME,
                           "--check-config"]).stdout
    m = re.search(r"^collection-window-ms:\s*(\d+)", out, re.MULTILINE)
    return int(m.group(1)) if m else 50


def _spread(counts):
    """'1' or '1-4 (median 3)'."""
    if not counts:
        return "-"
    lo, hi, med = min(counts), max(counts), sorted(counts)[len(counts) // 2]
    return "%d" % lo if lo == hi else "%d-%d (median %d)" % (lo, hi, med)


def run(run_):
    """The benchmark row "resolvers" (section g): see the module docstring."""
    import dnsperf
    import probes
    import benchsite as sitemod
    from report import ms

    sec = "g. resolvers"
    rep = run_.report
    site = run_.site
    window = collection_window_ms(run_.binary)
    # avahi-browse's first result for fresh types of the same kind (the reference), minus its
    # start-up on a cached type, as in row b
    avahi = [probes.avahi_first(run_.lab, t) for t in site.resolver_avahi_types]
    startup = [probes.avahi_first(run_.lab, t, cache_only=True) for t in site.resolver_avahi_types]
    good_startup = [s for s in startup if s is not None]
    s50 = dnsperf.percentile(good_startup, 50) if good_startup else 0.0
    adj = [None if a is None else a - s50 for a in avahi]
    good = [a for a in adj if a is not None]
    a50 = ms(dnsperf.percentile(good, 50)) if good else None
    a95 = ms(dnsperf.percentile(good, 95)) if good else None
    rep.row(sec, "avahi-browse first instance p50", a50, "ms",
            note="reference: %d fresh types of the same kind, minus avahi-browse start-up %.1f ms; %d without result"
            % (len(adj), ms(s50), len(adj) - len(good)))
    rep.row(sec, "avahi-browse first instance p95", a95, "ms")
    present_limit = None if a95 is None else a95 + window + 50
    present_target = "-" if present_limit is None else "<= %.0f ms (avahi p95 + %d + 50)" % (present_limit, window)

    rl = RL.ResolverLab(run_.lab)
    details = dict(avahi_s=avahi, avahi_startup_s=startup, collection_window_ms=window, resolvers={})
    os.environ.setdefault("DISCOVERY_PROXY_BIN", run_.binary)  # ResolverLab.start's first proxy
    rl.start()
    try:
        start_proxy(rl, run_.binary)  # this binary, default settings (negative-timeout 0.8 s)
        for kind in RL.RESOLVERS:
            if not RL.installed(kind):
                rep.row(sec, "%s: not installed" % kind, None, note="%s not on PATH" % RL.BINARIES[kind])
                continue
            run_.log("    %s" % kind)
            rl.start_resolver(kind)
            since = time.time()
            # the site's resolver knows the delegation already: warm lab2.example.'s NS
            client_query(rl, L.ZONE2, "SOA")
            present, absent, failures, present_names, absent_names = [], [], [], [], []
            for i, stype in enumerate(site.resolver_types[kind]):
                qname = "%s.%s" % (stype, sitemod.ZONE)
                present_names.append(qname)
                outcome, secs, _r = client_query(rl, qname)
                present.append(secs if outcome == "answer" else None)
                if outcome != "answer":
                    failures.append("%s PTR: %s after %.2f s" % (stype, outcome, secs))
                aname = "_na%s%02d%03x._tcp.%s" % (kind[:2], i, random.getrandbits(12), sitemod.ZONE)
                absent_names.append(aname)
                outcome, secs, _r = client_query(rl, aname)
                absent.append(secs if outcome == "nodata" else None)
                if outcome != "nodata":
                    failures.append("%s PTR: %s after %.2f s" % (aname.split(".")[0], outcome, secs))
            # what reached the proxy per client query: the resolver's retries (same browse)
            packets = rl.packets(since)
            sent_present = [len([x for x in RL.proxy_exchanges(packets, n, since) if x["type"] == "PTR"])
                            for n in present_names]
            sent_absent = [len([x for x in RL.proxy_exchanges(packets, n, since) if x["type"] == "PTR"])
                           for n in absent_names]
            rl.stop_resolver()
            p_ok = [s for s in present if s is not None]
            n_ok = [s for s in absent if s is not None]
            p50 = ms(dnsperf.percentile(p_ok, 50)) if p_ok else None
            p95 = ms(dnsperf.percentile(p_ok, 95)) if p_ok else None
            n50 = ms(dnsperf.percentile(n_ok, 50)) if n_ok else None
            n95 = ms(dnsperf.percentile(n_ok, 95)) if n_ok else None
            total = len(present) + len(absent)
            rep.row(sec, "%s: first-try failures" % kind, len(failures), "", target="0 of %d" % total,
                    ok=not failures, note="; ".join(failures[:3]))
            rep.row(sec, "%s: present type p50" % kind, p50, "ms",
                    note="%d fresh types, client's query to the resolver's answer; PTR queries the "
                         "resolver sent the proxy per type: %s" % (len(present), _spread(sent_present)))
            rep.row(sec, "%s: present type p95" % kind, p95, "ms", target=present_target,
                    ok=None if p95 is None or present_limit is None else p95 <= present_limit)
            rep.row(sec, "%s: absent type p50" % kind, n50, "ms",
                    note="%d fresh absent types, NOERROR/NODATA; PTR queries the resolver sent the "
                         "proxy per type: %s" % (len(absent), _spread(sent_absent)))
            rep.row(sec, "%s: absent type p95" % kind, n95, "ms", target="<= %.0f ms" % (ABSENT_TARGET_S * 1000),
                    ok=None if n95 is None else n95 <= ABSENT_TARGET_S * 1000)
            details["resolvers"][kind] = dict(present_s=present, absent_s=absent, failures=failures,
                                              present_sent=sent_present, absent_sent=sent_absent)
    finally:
        rl.stop()
    rep.detail("resolvers", details)


if __name__ == "__main__":
    if "--patience" not in sys.argv[1:]:
        print(__doc__)
        sys.exit(2)
    if os.geteuid() != 0:
        print("resolvers.py: must run as root (network namespaces)", file=sys.stderr)
        sys.exit(2)
    sys.exit(patience(sys.argv[1:]))
