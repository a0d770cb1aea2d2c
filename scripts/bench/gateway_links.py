#!/usr/bin/python3
"""Issue 45's "50 client links x 1,000 far instances": the mDNS gateway announcing one far
link's crowd on many client links at once, beside avahi-daemon 0.8's reflector.

    DPT_LAB_ID=gs DISCOVERY_PROXY_BIN=<exe> /usr/bin/python3 scripts/bench/gateway_links.py \
        [--links 50] [--count 1000] [--seconds 60] [--system gateway|reflector|both] \
        [--announce-burst PACKETS] [--churn F,S,R] [--json OUT]

The lab is gateway_scale.py's (test_gateway's GatewayLab) with `client_links=N`: the far
link (crowd.py's COUNT devices of _ipp._tcp, two announcements 1 s apart, beside the far
avahi responder) and N client links, link 1 the bridge with the client avahi-daemon, links
2 .. N a veth each into a namespace of their own (GatewayLab's NS_GK). The router's avahi-daemon runs with
deploy/avahi's [server] settings and no allow-interfaces line (it is on every link), and for
the reflector with `enable-reflector=yes`, `reflect-filters=_ipp._tcp`. The proxy announces
lab1.example.'s _ipp._tcp on every client link (log level info, defaults otherwise).

What is measured, from time zero (the crowd's first announcement) to --seconds:

* a capture of every client link (tcpdump -i any in the client namespace). For each link
  and each far instance, the time by which the router had sent its PTR, SRV, TXT and the
  A record of its SRV target on that link (not a goodbye): "announced". A link has
  converged when all COUNT are announced on it; the run, when every link has. Also the
  router's responses with the crowd's records on each link (both families; the router's
  avahi-daemon also speaks from its addresses, for its own host name): total, the busiest second, and the
  most any window of the run exceeds the per-link announcement budget by
  (mdns-announce-burst + mdns-announce-rate x window length: a token sends a packet over
  each IP family, so IPv4 responses are counted; answers to queries are not paced by it, so
  only on the links no client asks on: all but link 1).
* a python-zeroconf client (crowd_watch.py) on link 1, alone in its namespace: instances
  seen within 10 s and by the end, first-sight p95.
* the proxy's CPU (since its start) and RSS (VmRSS at the end, VmHWM); the router's
  avahi-daemon's CPU over the window; warning and error lines; gateway_publish_errors_total;
  gateway_announced_instances; notable lines of the router's avahi-daemon log.

--churn F,S,R has the crowd churn as in gateway_scale.py (a fraction F leave and return in
each of R rounds, S s apart; give --seconds to cover them) and lists the proxy's CPU in each
period: what following fifty client links costs once they have converged.

Issue 45's targets: converged within 60 s; per-link packet rate within the budget; no
avahi object errors. Only the lab's own namespaces and documentation addresses are used;
the lab is torn down at the end, on an error and on SIGTERM.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import time

os.environ.setdefault("DPT_LAB_ID", "gs")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "Tests", "integration"))
sys.path.insert(0, HERE)

import gateway_scale as S  # noqa: E402
import lab as L  # noqa: E402
import probes  # noqa: E402
import test_gateway as G  # noqa: E402

TYPE = "_ipp._tcp"
PREFIX = "Crowd"
FIRST_ADDR = "192.0.2.20"
TARGET_CONVERGED = 60.0
ANNOUNCE_RATE, ANNOUNCE_BURST = 20.0, 40.0     # the proxy's defaults (Sources/MDNS/AnnouncementQueue.swift)
INSTANCE = re.compile(r"^%s (\d{4})$" % PREFIX)
# crowd.py's host names; the gateway adds its far link's label (crowd-0001-lab1.local.)
HOST = re.compile(r"^%s-(\d{4})(?:-[a-z0-9-]+)?\.local\.$" % PREFIX.lower())
TYPE_LABELS = tuple(label.encode() for label in TYPE.split(".")) + (b"local", b"")


def router_avahi_conf(reflect):
    """gateway_scale's router configuration without its allow-interfaces line: the router's
    avahi-daemon is on every link (a list of 51 would also pass avahi 0.8's 256-byte line)."""
    conf = S.router_avahi_conf(TYPE if reflect else None)
    return "\n".join(line for line in conf.splitlines() if not line.startswith("allow-interfaces=")) + "\n"


def router_sources(links):
    """{source address of the router on a client link: link number}: its IPv4 address and
    its IPv6 link-local address on each."""
    out = {}
    for k in range(1, links + 1):
        rif, _cif, rv4, _c, _p, _z = G.client_link(k)
        out[rv4] = k
        text = L.nsrun(G.NS_GR, ["ip", "-6", "-o", "addr", "show", "dev", rif, "scope", "link"]).stdout
        for addr in re.findall(r"inet6 (fe80::[0-9a-f:]+)/", text):
            out[addr] = k
    return out


def wait_dad(timeout=20.0):
    """Until no address in the router's namespace is still tentative (IPv6 duplicate address
    detection): the responder's IPv6 sends need a source."""
    L.wait_for(lambda: "tentative" not in L.nsrun(G.NS_GR, ["ip", "-6", "addr"]).stdout, timeout,
               interval=0.3, what="the router's IPv6 addresses to leave DAD")


def instance(name):
    """The crowd device number of an instance name of TYPE in .local, or None."""
    if name.labels[1:] != TYPE_LABELS:
        return None
    m = INSTANCE.match(name.labels[0].decode("utf-8", "replace"))
    return int(m.group(1)) if m else None


def announced(packets, sources, t0, links):
    """From the capture: {link: {instance number: seconds after t0 announced}} and the
    router's responses carrying the crowd's records {(link, 4 or 6): [seconds after t0]}."""
    import dns.rdatatype as T
    seen = {k: collections.defaultdict(dict) for k in range(1, links + 1)}   # k -> inst -> {what: t}
    hosts = {k: {} for k in range(1, links + 1)}                              # k -> device -> first A t
    sent = collections.defaultdict(list)
    for ts, src, _sp, _dst, _dp, msg in packets:
        k = sources.get(src.split("%")[0])
        if k is None or not msg.flags & 0x8000:
            continue
        t = ts - t0
        crowd = False
        for rrset in msg.answer + msg.additional:
            if rrset.ttl == 0:
                continue
            owner = str(rrset.name)
            crowd = crowd or instance(rrset.name) is not None or HOST.match(owner) is not None
            if rrset.rdtype == T.PTR and owner == TYPE + ".local.":
                for rd in rrset:
                    inst = instance(rd.target)
                    if inst is not None:
                        seen[k][inst].setdefault("ptr", t)
                continue
            inst = instance(rrset.name)
            if inst is not None and rrset.rdtype in (T.SRV, T.TXT):
                seen[k][inst].setdefault(T.to_text(rrset.rdtype), t)
            elif rrset.rdtype == T.A and HOST.match(owner):
                # The SRV's RDATA stays unparsed (dnspython takes the cache-flush bit for a
                # class of its own): device k's target is crowd.py's crowd-k.local. (the
                # gateway's crowd-k-lab1.local.).
                hosts[k].setdefault(int(HOST.match(owner).group(1)), t)
        # The router's avahi-daemon speaks from the same addresses (its own host name on
        # each link): only packets with the crowd's records count.
        if crowd:
            sent[(k, 6 if ":" in src else 4)].append(t)
    out = {}
    for k in range(1, links + 1):
        done = {}
        for inst, parts in seen[k].items():
            host_t = hosts[k].get(inst)
            if len(parts) == 3 and host_t is not None:
                done[inst] = max(list(parts.values()) + [host_t])
        out[k] = done
    return out, sent


def budget_excess(times, rate, burst):
    """The most a window of `times` (sorted) holds beyond burst + rate x its length."""
    worst = 0.0
    for i in range(len(times)):
        for j in range(i, len(times)):
            worst = max(worst, (j - i + 1) - (burst + rate * (times[j] - times[i])))
    return worst


def busiest_second(times):
    best, j = 0, 0
    for i in range(len(times)):
        while times[i] - times[j] >= 1.0:
            j += 1
        best = max(best, i - j + 1)
    return best


def run_system(system, args):
    lab_ = L.Lab()
    g = G.GatewayLab(lab_, client_links=args.links)
    dumps = []
    try:
        S.log("[%s] starting the lab, %d client links (%s)" % (system, args.links, lab_.dir))
        g.start()
        lab_.stop_proc("gw-avahi-r")
        lab_.spawn_avahi(G.NS_GR, "gw-avahi-r", router_avahi_conf(system == "reflector"), (), g.router_dbus("gw"))
        lab_.wait_avahi_on_bus(G.NS_GR, "gw-avahi-r", g.router_dbus("gw"))
        wait_dad()
        pids = {"router avahi": lab_.procs["gw-avahi-r"].pid}
        if system == "gateway":
            with open(g.config, "w") as f:
                burst = "" if args.announce_burst is None else "mdns-announce-burst: %d" % args.announce_burst
                f.write(G.links_config(args.links, (TYPE,), extra=burst))
            g.start_proxy()
            pids["proxy"] = lab_.procs["gw-proxy"].pid
        settled = probes.settle(list(pids.values()))
        sources = router_sources(args.links)
        pcap = os.path.join(lab_.dir, "clients.pcap")
        # tcpdump on br-c, and -i any in the namespace holding the client ends of links 2 .. N
        dumps = [subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", ifname, "-n", "-B", "65536",
                                   "-w", "%s.%s" % (pcap, ns), "udp", "port", "5353"],
                                  stdout=subprocess.DEVNULL, stderr=open("%s.%s.err" % (pcap, ns), "w"),
                                  start_new_session=True)
                 for ns, ifname in [(G.NS_GC, "br-c")] + ([(G.NS_GK, "any")] if args.links > 1 else [])]
        watched = [1]
        watchers = {}
        for k in watched:
            name = "gs-watch%d" % k
            watchers[k] = lab_.spawn(G.NS_GC, [G.PY, os.path.join(HERE, "crowd_watch.py"), G.client_link(k)[3],
                                               TYPE, "0", str(args.seconds + 300)], name)
            pids["watcher %d" % k] = watchers[k].pid
        for k in watched:
            S.wait_line(lab_, "gs-watch%d" % k, r"^ready ", S.READY_TIMEOUT)
        time.sleep(1)
        cpu0 = {name: probes.cpu_seconds(pid) for name, pid in pids.items()}
        churn = []
        if args.churn is not None:
            churn = ["--churn-fraction", "%g" % args.churn[0], "--churn-period", "%g" % args.churn[1],
                     "--churn-rounds", "%d" % args.churn[2]]
        crowd = lab_.spawn(G.NS_GF, [G.PY, os.path.join(REPO, "Tests", "integration", "crowd.py"), "--iface", "br-f",
                                     "--type", TYPE, "--count", str(args.count), "--prefix", PREFIX,
                                     "--first-addr", FIRST_ADDR] + churn, "gs-crowd")
        pids["crowd"] = crowd.pid
        cpu0["crowd"] = 0.0
        t0 = float(S.wait_line(lab_, "gs-crowd", r"^crowd: announced (\S+)", S.READY_TIMEOUT).group(1))
        S.log("[%s] crowd of %d announced at %.3f (settled after %.1f s)" % (system, args.count, t0, settled))
        rss = []
        marks = list(range(10, int(args.seconds) + 1, 10))
        if args.churn is not None:
            # The proxy's CPU in each churn period (1 s before each leave), beside the marks.
            marks = sorted(set(marks) | {int(r * args.churn[1] - 1) for r in range(1, args.churn[2] + 2)
                                         if r * args.churn[1] - 1 <= args.seconds})
        cpu_marks = []
        for mark in marks:
            time.sleep(max(0.0, t0 + mark - time.time()))
            for name in ["gs-crowd"] + ["gs-watch%d" % k for k in watched] + (["gw-proxy"] if system == "gateway" else []):
                lab_.check_alive(name)
            if system == "gateway":
                rss.append((mark, S.rss_mib(pids["proxy"])))
            cpu_marks.append((mark, probes.cpu_seconds(pids.get("proxy", pids["router avahi"]))))
            S.log("[%s] %3d s: proxy CPU %s, RSS %s MiB" % (
                system, mark, "-" if "proxy" not in pids else "%.2f s" % probes.cpu_seconds(pids["proxy"]),
                "-" if not rss else "%.1f" % rss[-1][1]))
        cpu1 = {name: probes.cpu_seconds(pid) for name, pid in pids.items()}
        result = {"system": system, "links": args.links, "count": args.count, "seconds": args.seconds,
                  "cpu_window": {n: cpu1[n] - cpu0[n] for n in pids}, "cpu_proxy_total": cpu1.get("proxy"),
                  "rss_mib": rss, "cpu_marks": cpu_marks}
        if system == "gateway":
            result["rss_end_mib"] = S.rss_mib(pids["proxy"])
            result["rss_peak_mib"] = S.rss_mib(pids["proxy"], "VmHWM")
            metrics = g.get("/metrics")
            result["publish_errors"] = S.metric(metrics, "gateway_publish_errors_total")
            result["announced_metric"] = S.metric(metrics, "gateway_announced_instances")
            result["proxy_warnings"], result["proxy_errors"], result["proxy_top"] = \
                S.proxy_log_problems(lab_.log_text("gw-proxy", tail=10 ** 7))
        time.sleep(0.5)
        packets, result["capture_dropped"] = [], 0
        for dump in dumps:
            L.kill_pid(dump.pid, signal.SIGTERM)
            dump.wait(10)
        for ns in [G.NS_GC] + ([G.NS_GK] if args.links > 1 else []):
            with open("%s.%s.err" % (pcap, ns)) as f:
                dropped = re.findall(r"(\d+) packets dropped by kernel", f.read())
            result["capture_dropped"] += int(dropped[0]) if dropped else 0
            S.log("[%s] reading the capture in %s (%.1f MB)" % (system, ns, os.path.getsize("%s.%s" % (pcap, ns)) / 1e6))
            packets += L.dns_packets("%s.%s" % (pcap, ns))
        per_link, sent = announced(packets, sources, t0, args.links)
        both = {k: sorted(sent[(k, 4)] + sent[(k, 6)]) for k in per_link}
        conv = {}
        for k, done in per_link.items():
            conv[k] = max(done.values()) if len(done) >= args.count else None
        result["announced_by"] = {"10": sum(sum(1 for t in d.values() if t <= 10) for d in per_link.values()),
                                  "end": sum(len(d) for d in per_link.values())}
        result["links_converged"] = sum(1 for v in conv.values() if v is not None)
        times = sorted(v for v in conv.values() if v is not None)
        result["converged_p50"] = S.percentile(times + [float("inf")] * (args.links - len(times)), 50)
        result["converged_max"] = None if len(times) < args.links else times[-1]
        result["fewest_on_a_link"] = min(len(d) for d in per_link.values())
        result["packets"] = {"total": sum(len(v) for v in both.values()),
                             "ipv4": sum(len(sent[(k, 4)]) for k in per_link),
                             "per_link_max": max(len(v) for v in both.values()),
                             "busiest_second": max(busiest_second(v) for v in both.values())}
        # The budget is the announcements' (a token sends a packet over each IP family); answers
        # to queries are not paced by it, so it is checked on links no client asks on.
        burst = ANNOUNCE_BURST if args.announce_burst is None else args.announce_burst
        quiet = [k for k in per_link if k not in watched] or list(per_link)
        result["budget_excess"] = max(budget_excess(sorted(sent[(k, 4)]), ANNOUNCE_RATE, burst) for k in quiet)
        result["watchers"] = {}
        for k in watched:
            seen = S.sightings(lab_.log_text("gs-watch%d" % k, tail=10 ** 6), PREFIX)
            delays = sorted([t - t0 for t in seen.values()] + [float("inf")] * (args.count - len(seen)))
            result["watchers"][str(k)] = {"within10": sum(1 for d in delays if d <= 10),
                                          "end": sum(1 for d in delays if d <= args.seconds),
                                          "p95": S.percentile(delays, 95)}
        result["avahi_notable"], result["avahi_top"] = S.avahi_log_problems(lab_.log_text("gw-avahi-r", tail=10 ** 7))
        return result
    finally:
        for dump in dumps:
            if dump.poll() is None:
                L.kill_pid(dump.pid, signal.SIGTERM)
        lab_.stop_proc("gs-watch1")
        lab_.stop_proc("gs-crowd")
        g.stop()
        lab_.stop()
        if os.environ.get("DPT_KEEP_LOGS"):
            S.log("[%s] logs kept in %s" % (system, lab_.dir))


def table(results, args):
    names = [r["system"] for r in results]
    gw = next((r for r in results if r["system"] == "gateway"), None)
    rows = []
    total = args.links * args.count

    def row(label, fmt, target="", met=None):
        rows.append((label,) + tuple(fmt(r) for r in results) + (target, S.MET[met]))

    row("announced on its link within 10 s", lambda r: "%d of %d" % (r["announced_by"]["10"], total))
    row("announced by the end", lambda r: "%d of %d" % (r["announced_by"]["end"], total))
    row("links converged (all %d announced)" % args.count, lambda r: "%d of %d" % (r["links_converged"], args.links))
    row("link convergence p50 / max", lambda r: "%s / %s" % (S._secs(r["converged_p50"]), S._secs(r["converged_max"])),
        "max <= %g s" % TARGET_CONVERGED,
        None if gw is None else gw["converged_max"] is not None and gw["converged_max"] <= TARGET_CONVERGED)
    for k in (1,):
        row("python-zeroconf on link %d: seen in 10 s / by the end" % k,
            lambda r, k=k: "%d / %d" % (r["watchers"][str(k)]["within10"], r["watchers"][str(k)]["end"]))
        row("python-zeroconf on link %d: first sight p95" % k, lambda r, k=k: S._secs(r["watchers"][str(k)]["p95"]))
    row("router's responses, all links (IPv4)", lambda r: "%d (%d)" % (r["packets"]["total"], r["packets"]["ipv4"]))
    row("router's responses, busiest link / its busiest second",
        lambda r: "%d / %d" % (r["packets"]["per_link_max"], r["packets"]["busiest_second"]))
    burst = ANNOUNCE_BURST if args.announce_burst is None else args.announce_burst
    row("most over the per-link budget (IPv4 packets, quiet links)", lambda r: "%.1f" % r["budget_excess"],
        "< 1 (%g + %g/s)" % (burst, ANNOUNCE_RATE), None if gw is None else gw["budget_excess"] < 1)
    row("CPU s, proxy since its start", lambda r: S._num(r["cpu_proxy_total"]))
    row("CPU s, router avahi-daemon, window", lambda r: S._num(r["cpu_window"].get("router avahi")))
    row("proxy RSS MiB, end / peak", lambda r: "%s / %s" % (S._num(r.get("rss_end_mib"), "%.1f"),
                                                           S._num(r.get("rss_peak_mib"), "%.1f")))
    row("proxy log warnings / errors", lambda r: "%s / %s" % (S._num(r.get("proxy_warnings"), "%d"),
                                                             S._num(r.get("proxy_errors"), "%d")),
        "0 errors", None if gw is None else gw["proxy_errors"] == 0)
    row("gateway_publish_errors_total", lambda r: S._num(r.get("publish_errors"), "%d"), "0",
        None if gw is None else gw["publish_errors"] == 0)
    row("gateway_announced_instances (metric)", lambda r: S._num(r.get("announced_metric"), "%d"))
    row("router avahi: notable log lines", lambda r: "%d" % r["avahi_notable"], "no object errors",
        None if gw is None else not any("object" in line.lower() for _n, line in gw["avahi_top"]))
    row("capture: packets dropped by the kernel", lambda r: S._num(r["capture_dropped"], "%d"))
    head = ("%d client links x %d devices of %s, %g s" % (args.links, args.count, TYPE, args.seconds),) + \
        tuple(names) + ("target (gateway)", "met")
    out = S.aligned(head, rows)
    for r in results:
        out += S.log_tops(r)
        if args.churn is not None:
            ends = [int(k * args.churn[1] - 1) for k in range(1, args.churn[2] + 2)]
            at = dict(r["cpu_marks"])
            per = [at[b] - at[a] for a, b in zip(ends, ends[1:]) if a in at and b in at]
            out.append("%s: %s CPU s in each churn period: %s" % (
                r["system"], "proxy" if r["system"] == "gateway" else "router avahi",
                " ".join("%.2f" % v for v in per)))
        if r["rss_mib"]:
            out.append("%s: proxy RSS MiB every 10 s: %s" % (r["system"], " ".join("%.1f" % v for _t, v in r["rss_mib"])))
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--links", type=int, default=50, help="client links (1 to %d)" % G.MAX_CLIENT_LINKS)
    ap.add_argument("--count", type=int, default=1000, help="far devices (1 to 9999)")
    ap.add_argument("--seconds", type=float, default=60.0, help="measured from the crowd's first announcement")
    ap.add_argument("--system", choices=("gateway", "reflector", "both"), default="both")
    ap.add_argument("--announce-burst", type=int, metavar="PACKETS")
    ap.add_argument("--churn", type=S.parse_churn, metavar="F,S,R",
                    help="crowd.py's churn (gateway_scale.py's --churn); the proxy's CPU per period is listed")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)
    if not 1 <= args.links <= G.MAX_CLIENT_LINKS or not 1 <= args.count <= 9999 or not 10 <= args.seconds <= 600:
        ap.error("--links must be 1 to %d, --count 1 to 9999, --seconds 10 to 600" % G.MAX_CLIENT_LINKS)
    return S.run_all(ap, args, run_system, table, {"links": args.links, "count": args.count, "seconds": args.seconds})


if __name__ == "__main__":
    sys.exit(main())
