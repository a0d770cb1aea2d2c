"""The measurements, in run order. Each records rows in the report; none asserts on a number."""

from __future__ import annotations

import os
import time

import dns.flags
import dns.rdatatype

import dnsperf
import lab
import probes
import refservers
import benchsite as sitemod
from proxies import MEMORY_PORT, NOREPLAY_PORT, OPTIMISTIC_PORT, Proxy
from report import ms

KIB = 1024
SCALE_CLIENTS, SCALE_OUTSTANDING = 2, 50


class Run:
    """Shared state of one benchmark run."""

    def __init__(self, lab_, site, report, binary, log):
        self.lab, self.site, self.sizes = lab_, site, site.sizes
        self.report, self.binary, self.log = report, binary, log
        self.main = None                 # the proxy behind the throughput rows
        self.ports = {}                  # server name -> DNS port
        self.udp_best = None             # the proxy's best UDP dnsperf result
        self.udp_refs = {}               # the reference servers' best UDP qps
        self.site_queries = []           # what warm_site asked to learn the site
        self.cold_p50 = None

    def path(self, name):
        return os.path.join(self.lab.dir, name)


def _drain(run, port):
    return probes.drain(port, sitemod.ZONE)


def _minus(a, b):
    return None if a is None or b is None else a - b


def _ms_stats(samples):
    good = [s for s in samples if s is not None]
    return (ms(dnsperf.percentile(good, 50)), ms(dnsperf.percentile(good, 95)),
            len(good), len(samples) - len(good))


# --------------------------------------------------------------------------- b. cold miss
def cold_miss(run):
    """Fresh types only: the proxy's first answer vs avahi-browse's first instance, on
    separate types (context) and paired on the same types (the target)."""
    window = run.main.collection_window_ms()
    target = "<= %d ms (window %d + 10)" % (window + 10, window)
    avahi, proxy, own = [], [], []
    first_result = "mdns_first_result_seconds_sum"
    for a_type, p_type in zip(run.site.cold_avahi_types, run.site.cold_proxy_types):
        avahi.append(probes.avahi_first(run.lab, a_type))
        before = probes.metric_sum(run.main.admin_port, first_result)
        r, secs = probes.ask("%s.%s" % (p_type, sitemod.ZONE), "PTR", run.main.port)
        proxy.append(secs if r is not None and r.answer else None)
        # The proxy's own share: its answer time minus the time its mDNS query took to the
        # first record (the metric the proxy records for each new browse).
        mdns = probes.metric_sum(run.main.admin_port, first_result) - before
        own.append(secs - mdns if r is not None and r.answer and mdns > 0 else None)
    # avahi-browse's own start-up (process, D-Bus, browser) on a type now in its cache
    startup = [probes.avahi_first(run.lab, t, cache_only=True) for t in run.site.cold_avahi_types]
    a50, a95, a_n, a_fail = _ms_stats(avahi)
    p50, p95, p_n, p_fail = _ms_stats(proxy)
    s50 = _ms_stats(startup)[0] or 0.0
    run.cold_p50 = p50
    adj50 = None if a50 is None else a50 - s50
    adj95 = None if a95 is None else a95 - s50
    sec = "b. cold miss"
    rep = run.report
    rep.row(sec, "proxy first answer p50", p50, "ms", note="%d fresh types, %d without answer" % (p_n, p_fail))
    rep.row(sec, "proxy first answer p95", p95, "ms")
    rep.row(sec, "avahi-browse first instance p50", adj50, "ms",
            note="raw %.1f ms minus avahi-browse start-up %.1f ms; %d other fresh types, %d without result"
            % (a50 or 0, s50, a_n, a_fail))
    rep.row(sec, "avahi-browse first instance p95", adj95, "ms")
    rep.row(sec, "unpaired overhead p50 (proxy - avahi)", _minus(p50, adj50), "ms",
            note="context: p50s of different types, so their mDNS timings differ; the target is on paired")
    rep.row(sec, "unpaired overhead p95 (proxy - avahi)", _minus(p95, adj95), "ms")
    o50, o95, o_n, _o_fail = _ms_stats(own)
    rep.row(sec, "proxy's own: answer - its first mDNS record, p50", o50, "ms",
            note="per query, from mdns_first_result_seconds; %d samples; free of mDNS timing noise" % o_n)
    rep.row(sec, "proxy's own: answer - its first mDNS record, p95", o95, "ms")
    paired = _cold_paired(run, s50 / 1000.0, target, window)
    rep.detail("cold_miss", dict(proxy_s=proxy, avahi_s=avahi, avahi_startup_s=startup, own_s=own,
                                 collection_window_ms=window, paired=paired))


def _cold_paired(run, startup, target, window):
    """Each fresh type asked of avahi-browse and of the proxy together (one mDNS query
    serves both, probes.paired_first); the target is judged on the per-pair difference."""
    avahi, proxy, lag, diff = [], [], [], []
    for stype in run.site.cold_paired_types:
        a, p, late = probes.paired_first(run.lab, stype, "%s.%s" % (stype, sitemod.ZONE),
                                         run.main.port, startup)
        avahi.append(a)
        proxy.append(p)
        lag.append(late)
        diff.append(_minus(p, a))
    d50, d95, d_n, d_fail = _ms_stats(diff)
    a50, _a95, _a_n, a_fail = _ms_stats(avahi)
    p50, _p95, _p_n, p_fail = _ms_stats(proxy)
    sec = "b. cold miss"
    rep = run.report
    rep.row(sec, "paired: overhead p50 (proxy - avahi)", d50, "ms", target=target,
            ok=None if d50 is None else d50 <= window + 10,
            note="per pair: the same fresh type asked of avahi-browse and, %.1f ms later (its start-up), "
                 "of the proxy: one mDNS query and its first response serve both, so mDNS timing cancels; "
                 "%d pairs, "
                 "%d without avahi line, %d without proxy answer" % (startup * 1000, d_n, a_fail, p_fail))
    rep.row(sec, "paired: overhead p95 (proxy - avahi)", d95, "ms")
    rep.row(sec, "paired: avahi-browse first instance p50", a50, "ms",
            note="from its start + start-up %.1f ms" % (startup * 1000))
    rep.row(sec, "paired: proxy first answer p50", p50, "ms",
            note="from its query; query sent %.2f ms after the start-up at p50"
                 % (ms(dnsperf.percentile(lag, 50)) or 0))
    return dict(types=list(run.site.cold_paired_types), startup_s=startup, avahi_s=avahi, proxy_s=proxy,
                query_lag_s=lag, diff_s=diff)


# --------------------------------------------------------------------------- warm + zone
def warm_site(run):
    qs = sitemod.learn_queries(run.site.of_types(run.site.site_types))
    run.site_queries = qs
    left = probes.warm(qs, run.main.port, log=run.log)
    if left:
        raise RuntimeError("the proxy never answered %d site queries, e.g. %r" % (len(left), left[:3]))
    before = probes.answer_counts(run.main.admin_port)
    left = probes.warm(qs, run.main.port, passes=1, log=run.log)
    after = probes.answer_counts(run.main.admin_port)
    misses = after.get("miss", 0) - before.get("miss", 0)
    hits = after.get("hit", 0) - before.get("hit", 0)
    run.report.meta["warm_check"] = "%d queries: %d hits, %d misses" % (len(set(qs)), hits, misses)
    if misses or left:
        raise RuntimeError("after warming, %d of the site queries still missed" % max(misses, len(left)))
    mix = sitemod.mix_queries(run.site.of_types(run.site.site_types))
    run.mixfile = dnsperf.write_queries(run.path("site-mix.txt"), mix)
    run.report.meta["query_mix"] = {t: sum(1 for q in mix if q[1] == t)
                                    for t in ("PTR", "SRV", "TXT", "A", "AAAA")}
    return qs


def start_references(run, queries):
    zone_text = refservers.walk_proxy(queries, sitemod.ZONE, port=run.main.port)
    with open(run.path("static-zone.txt"), "w") as f:
        f.write(zone_text)
    run.ports = {"proxy": run.main.port,
                 "knot": refservers.start_knot(run.lab, sitemod.ZONE, zone_text),
                 "nsd": refservers.start_nsd(run.lab, sitemod.ZONE, zone_text)}
    # same answers: compare the answer sections of a sample
    for name, rtype in queries[:: max(1, len(queries) // 25)]:
        want = _answer_set(run.ports["proxy"], name, rtype)
        for ref in ("knot", "nsd"):
            got = _answer_set(run.ports[ref], name, rtype)
            if got != want:
                raise RuntimeError("%s answers %s %s differently from the proxy: %r vs %r" % (
                    ref, name, rtype, got, want))


def _answer_set(port, name, rtype):
    """Answer records as comparable text: one per record, sorted, and lowercased
    because Knot stores names in RDATA lowercased (DNS names compare case-insensitively).
    Without TTLs: a browse younger than 1.2 s answers with the provisional 2 s TTL (issue 42),
    the static zone with the settled 10 s."""
    r, _s = probes.ask(name, rtype, port, timeout=3, tcp=True)
    if r is None:
        return None
    return sorted(("%s %s" % (rrset.name, rd.to_text())).lower()
                  for rrset in r.answer for rd in rrset)


# --------------------------------------------------------------------------- a. throughput
def throughput(run):
    sec = "a. cache-hit qps"
    for mode in ("udp", "tcp"):
        tries = {s: [] for s in run.ports}
        for clients, outstanding in run.sizes.dnsperf_settings:  # interleaved: same load drift for all
            for server, port in run.ports.items():
                t = dnsperf.run(port, run.mixfile, run.sizes.dnsperf_seconds, mode=mode,
                                clients=clients, outstanding=outstanding)
                t.pop("latencies")
                if server == "proxy":
                    t["drain_s"] = _drain(run, port)
                tries[server].append(t)
                run.log("    %s %s -c %d -q %d: %.0f qps (lost %d)" % (
                    server, mode, clients, outstanding, t["qps"], t["lost"]))
        best = {s: max(ts, key=lambda t: t["qps"]) for s, ts in tries.items()}
        if mode == "udp":
            run.udp_best = best["proxy"]
            run.udp_refs = {s: best[s]["qps"] for s in run.ports if s != "proxy"}
        for server in run.ports:
            b = best[server]
            run.report.row(sec, "%s %s" % (server, mode.upper()), b["qps"], "qps",
                           note="best of -c/-q %s: -c %d -q %d, %d lost, %s B/answer" % (
                               "/".join("%d/%d" % s for s in run.sizes.dnsperf_settings),
                               b["clients"], b["outstanding"], b["lost"], b["response_size"]))
        p, k, n = best["proxy"]["qps"], best["knot"]["qps"], best["nsd"]["qps"]
        run.report.row(sec, "proxy/knot %s" % mode.upper(), p / k if k else None, "x")
        run.report.row(sec, "proxy/nsd %s" % mode.upper(), p / n if n else None, "x")
        better = max(k, n)
        run.report.row(sec, "proxy/better %s" % mode.upper(), p / better if better else None, "x",
                       target=">= 1.0", ok=bool(better) and p >= better)
        run.report.detail("throughput_%s" % mode, tries)


def no_replay(run):
    """A second proxy with `replay-answers: false`: every query is answered by the proxy (its
    answer memo, shared by all clients), as a client's first query for a question is. In the
    rows above one client address asks the same queries over and over, so nearly every answer
    there is replayed; real sites have many clients. Context, no target."""
    sec = "a. cache-hit qps"
    p = Proxy(run.lab, run.binary, NOREPLAY_PORT, "proxy-noreplay", extra_config="replay-answers: false\n").start()
    try:
        for _ in range(2):
            left = probes.warm(run.site_queries, p.port, log=run.log)
        if left:
            raise RuntimeError("the replay-off proxy never answered %d site queries" % len(left))
        b = run.udp_best
        t = dnsperf.run(p.port, run.mixfile, run.sizes.dnsperf_seconds, clients=b["clients"],
                        outstanding=b["outstanding"])
        t.pop("latencies")
        better = max(run.udp_refs.values()) if run.udp_refs else 0
        run.log("    proxy, replay off, udp -c %d -q %d: %.0f qps (lost %d)" % (
            b["clients"], b["outstanding"], t["qps"], t["lost"]))
        run.report.row(sec, "proxy UDP, replay off", t["qps"], "qps",
                       note="replay-answers: false: every query through the proxy and its shared answer "
                            "memo, as a new client's first query; -c %d -q %d, %d lost" % (
                                b["clients"], b["outstanding"], t["lost"]))
        run.report.row(sec, "proxy/better UDP, replay off", t["qps"] / better if better else None, "x")
        run.report.detail("throughput_udp_noreplay", t)
    finally:
        p.stop()


# --------------------------------------------------------------------------- c. latency
def latency_at_half_load(run, section="c. hit latency @50%", label="", datafile=None, judged=True):
    rate = max(1, int(run.udp_best["qps"] * 0.5))
    datafile = datafile or run.mixfile
    servers = run.ports if not label else {"proxy": run.main.port}
    out = {}
    # With two CPUs or more, the server runs on CPU 1 and dnsperf on CPU 0 (probes.Pinned).
    # Every other process of the lab (avahi-daemons, far responders, dbus, the capture, the
    # servers not under test) runs on dnsperf's CPU at the lowest priority: the lab's mDNS
    # bursts (avahi refreshing thousands of cached records, the responders answering) took
    # CPU 1 from the server for 1-10 ms at a time, ~100 times in 8 s (perf -C 1).
    pinned = (os.cpu_count() or 1) >= 2
    for server, port in servers.items():
        owners = probes.port_owners(run.lab, port) if pinned else []
        others = [pid for pid in probes.lab_processes(run.lab) if pid not in owners] if pinned else []
        with probes.Pinned(owners, {1}), probes.Pinned(others, {0}, nice=19):
            t = dnsperf.run(port, datafile, run.sizes.latency_seconds, clients=1, outstanding=100,
                            qps=rate, verbose=True, cpu=0 if pinned else None)
        lat = t.pop("latencies")
        if server == "proxy":
            _drain(run, port)
        p50, p99 = ms(dnsperf.percentile(lat, 50)), ms(dnsperf.percentile(lat, 99))
        out[server] = dict(p50_ms=p50, p99_ms=p99, samples=len(lat), qps=t["qps"], lost=t["lost"],
                           rate=rate, pinned_pids=owners,
                           **{"p%s_ms" % p: ms(dnsperf.percentile(lat, float(p))) for p in ("90", "99.9", "100")})
        note = "-Q %d (50%% of proxy peak UDP), %d samples, %.0f qps done, %d lost%s" % (
            rate, len(lat), t["qps"], t["lost"],
            ", server pinned to CPU 1 (pid %s), dnsperf and %d other lab processes (nice 19) to CPU 0" % (
                "/".join(map(str, owners)), len(others)) if owners else "")
        if server == "proxy":
            run.report.row(section, "%sproxy p50" % label, p50, "ms", note=note)
            run.report.row(section, "%sproxy p99" % label, p99, "ms", target="<= 1 ms" if judged else "",
                           ok=None if p99 is None or not judged else p99 <= 1.0)
        else:
            run.report.row(section, "%s p50 / p99 (same rate)" % server,
                           "%.3f / %.3f" % (p50 or 0, p99 or 0), "ms")
    run.report.detail("latency%s" % ("_" + label.strip(" :") if label else ""), out)
    return out


# --------------------------------------------------------------------------- e. scaling
def scaling(run):
    sec = "e. scaling"
    proxy_pid = run.main.pid
    clients = SCALE_CLIENTS
    data = {}
    for count, stype in run.site.scale_types.items():
        services = run.site.of_type(stype)
        learn = sitemod.learn_queries(services)
        left = probes.warm(learn, run.main.port, log=run.log)
        if left:
            raise RuntimeError("%d queries for %s never answered" % (len(left), stype))
        quiet_s = probes.settle(_mdns_pids(run))
        ptr_name = "%s.%s" % (stype, sitemod.ZONE)
        r, _s = probes.ask(ptr_name, "PTR", run.main.port, timeout=30)
        one = sorted(probes.ask(ptr_name, "PTR", run.main.port, timeout=30)[1] for _ in range(3))[1]
        # Outstanding queries: SCALE_OUTSTANDING, fewer when one answer takes long, so that
        # a run leaves at most ~half a second of queued work behind.
        outstanding = max(1, min(SCALE_OUTSTANDING, int(0.5 / max(one, 1e-6))))
        if r is None:
            raise RuntimeError("no answer to %s PTR within 30 s" % ptr_name)
        tc = bool(r.flags & dns.flags.TC)
        n_ptr = sum(len(rr) for rr in r.answer if rr.rdtype == dns.rdatatype.PTR)
        ptr_file = dnsperf.write_queries(run.path("scale-%d-ptr.txt" % count), [(ptr_name, "PTR")])
        mix_file = dnsperf.write_queries(run.path("scale-%d-mix.txt" % count),
                                         [q for q in learn if q[1] != "PTR"])
        ptr = dnsperf.run(run.main.port, ptr_file, run.sizes.scale_seconds, clients=clients,
                          outstanding=outstanding)
        ptr["drain_s"] = _drain(run, run.main.port)
        mix = dnsperf.run(run.main.port, mix_file, run.sizes.scale_seconds, clients=clients,
                          outstanding=SCALE_OUTSTANDING)
        mix["drain_s"] = _drain(run, run.main.port)
        rss = probes.rss_kib(proxy_pid)
        run.report.row(sec, "%d instances: one PTR answer" % count, ms(one), "ms",
                       note="median of 3 single UDP queries")
        run.report.row(sec, "%d instances: PTR qps" % count, ptr["qps"], "qps",
                       note="-c %d -q %d; %s%d PTRs in the UDP answer, %s B; %.1f s to drain; "
                            "%.0f s for avahi and the responder to go quiet first" % (
                           clients, outstanding, "TC set, " if tc else "", n_ptr,
                           ptr["response_size"], ptr["drain_s"], quiet_s))
        run.report.row(sec, "%d instances: SRV/TXT/A/AAAA qps" % count, mix["qps"], "qps",
                       note="-c %d -q %d; %.1f s to drain" % (clients, SCALE_OUTSTANDING, mix["drain_s"]))
        run.report.row(sec, "%d instances: proxy RSS" % count, rss / 1024.0, "MiB",
                       note="cumulative: site and earlier rows still cached")
        data[count] = dict(ptr=_strip(ptr), mix=_strip(mix), rss_kib=rss, tc=tc, ptrs_in_answer=n_ptr,
                           one_ptr_s=one, settle_s=quiet_s)
    # The flatness check: the smallest and the largest type measured again, alternately,
    # three times each, and the median of the three ratios; 5 s runs on a shared 2-core
    # machine move by ±10% between one run and the next, which the one-off rows above show.
    n_min, n_max = min(data), max(data)
    files = {n: (run.path("scale-%d-ptr.txt" % n), run.path("scale-%d-mix.txt" % n)) for n in (n_min, n_max)}
    ratios = {"ptr": [], "mix": []}
    for _round in range(run.sizes.scale_rounds):
        qps = {}
        for n in (n_min, n_max):
            for kind, path in zip(("ptr", "mix"), files[n]):
                outstanding = data[n]["ptr"]["outstanding"] if kind == "ptr" else SCALE_OUTSTANDING
                t = dnsperf.run(run.main.port, path, run.sizes.scale_seconds, clients=clients,
                                outstanding=outstanding)
                _drain(run, run.main.port)
                qps[(n, kind)] = t["qps"]
        for kind in ratios:
            base = qps[(n_min, kind)]
            ratios[kind].append(qps[(n_max, kind)] / base if base else 0.0)
    med = {kind: sorted(v)[len(v) // 2] if v else None for kind, v in ratios.items()}
    for kind, label in (("ptr", "PTR qps %d / %d instance" % (n_max, n_min)),
                        ("mix", "SRV/TXT/A mix qps %d / %d" % (n_max, n_min))):
        run.report.row(sec, label, med[kind], "x", target="~1.0 (flat, >= 0.9)",
                       ok=None if med[kind] is None else med[kind] >= 0.9,
                       note="median of %d interleaved pairs of runs: %s" % (
                           len(ratios[kind]), ", ".join("%.2f" % r for r in ratios[kind])))
    data["flat_ratios"] = ratios
    run.report.detail("scaling", data)


def _mdns_pids(run):
    """The router's avahi-daemon and the far responder: the lab's mDNS work."""
    return [run.lab.procs[n].pid for n in ("avahi-r", "bench-responder") if n in run.lab.procs]


def _strip(t):
    t = dict(t)
    t.pop("latencies", None)
    return t


def held_tcp(run):
    sec = "e. scaling"
    n = run.sizes.tcp_held
    # The same measurement just before, without the connections, as the row's context: between
    # rows the p99 moves with the lab's own load by more than the connections move it.
    before = latency_at_half_load(run, section=sec, label="no TCP conns held: ", judged=False)
    held = probes.HeldTCP(run.main.port, n, "%s.%s" % (run.site.site_types[0], sitemod.ZONE))
    try:
        est = held.established(run.main.port)
        b = run.udp_best
        t = dnsperf.run(run.main.port, run.mixfile, run.sizes.dnsperf_seconds,
                        clients=b["clients"], outstanding=b["outstanding"])
        t.pop("latencies")
        t["drain_s"] = _drain(run, run.main.port)
        run.report.row(sec, "%d TCP conns held: UDP qps" % n, t["qps"], "qps",
                       note="%d established, %d answered their query; peak without: %.0f; "
                            "%.1f s to drain" % (est, held.answered, b["qps"], t["drain_s"]))
        lat = latency_at_half_load(run, section=sec, label="%d TCP conns held: " % n)
        rss = probes.rss_kib(run.main.pid)
        run.report.row(sec, "%d TCP conns held: proxy RSS" % n, rss / 1024.0, "MiB")
        run.report.detail("tcp_held", dict(count=n, established=est, answered=held.answered,
                                           udp=t, latency=lat["proxy"], latency_before=before["proxy"],
                                           rss_kib=rss))
    finally:
        held.close()


# --------------------------------------------------------------------------- f. optimistic
def optimistic(run):
    sec = "f. optimistic"
    idle = 2
    p = Proxy(run.lab, run.binary, OPTIMISTIC_PORT, "proxy-optimistic", idle_timeout=idle).start()
    try:
        names = ["%s.%s" % (t, sitemod.ZONE) for t in run.site.optimistic_types]
        left = probes.warm([(n, "PTR") for n in names], p.port, log=run.log)
        if left:
            raise RuntimeError("optimistic types never answered: %r" % left[:3])
        # the sweeper runs every max(1 s, idle/4): released within idle + 1 s
        time.sleep(idle + 2.5)
        before = probes.answer_counts(p.admin_port)
        samples, ttls = [], []
        for n in names:
            r, secs = probes.ask(n, "PTR", p.port)
            samples.append(secs if r is not None and r.answer else None)
            ttls += [rr.ttl for rr in (r.answer if r is not None else [])]
        after = probes.answer_counts(p.admin_port)
        optimistic_n = after.get("optimistic", 0) - before.get("optimistic", 0)
        p50, p95, good, failed = _ms_stats(samples)
        run.report.row(sec, "released browse, answer p50", p50, "ms",
                       target="~ cache hit, << cold miss",
                       ok=None if p50 is None or run.cold_p50 is None else p50 < run.cold_p50 / 10,
                       note="%d queries, %d optimistic (metrics), TTLs %s; idle timeout %d s" % (
                           len(names), optimistic_n, sorted(set(ttls)), idle))
        run.report.row(sec, "released browse, answer p95", p95, "ms")
        run.report.row(sec, "cold miss p50 (from b.)", run.cold_p50, "ms")
        run.report.detail("optimistic", dict(samples_s=samples, ttls=ttls, optimistic_answers=optimistic_n))
    finally:
        p.stop()


# --------------------------------------------------------------------------- d. memory
def memory(run):
    sec = "d. memory"
    p = Proxy(run.lab, run.binary, MEMORY_PORT, "proxy-memory").start()
    try:
        time.sleep(2.0)
        idle = probes.rss_kib(p.pid)
        run.report.row(sec, "proxy RSS idle", idle / 1024.0, "MiB", note="no browse yet")
        site_services = run.site.of_types(run.site.site_types)
        extra = run.site.of_types(run.site.memory_types)
        steps = [(len(site_services), site_services), (len(site_services) + len(extra), extra)]
        data = {"idle_kib": idle}
        for total, services in steps:
            left = probes.warm(sitemod.learn_queries(services), p.port, workers=32, log=run.log)
            if left:
                raise RuntimeError("%d learn queries never answered" % len(left))
            time.sleep(1.0)
            rss = probes.rss_kib(p.pid)
            per = (rss - idle) * KIB / total
            run.report.row(sec, "proxy RSS, %d instances known" % total, rss / 1024.0, "MiB",
                           note="PTR+SRV+TXT of each (and A/AAAA of %d hosts) asked" % len(run.site.hosts))
            # Judged at the largest count: at 500 the fixed costs of the first browses (malloc
            # arenas of the threads that took part, tables at their first sizes) are most of it.
            judged = total == steps[-1][0]
            run.report.row(sec, "bytes per instance (%d)" % total, per, "B", target="<= 2048 B" if judged else "",
                           ok=per <= 2048 if judged else None,
                           note="" if judged else "context: fixed costs over idle spread over %d instances" % total)
            if total != steps[0][0]:
                first = data[steps[0][0]]["rss_kib"]
                marginal = (rss - first) * KIB / (total - steps[0][0])
                run.report.row(sec, "bytes per instance, %d to %d" % (steps[0][0], total), marginal, "B",
                               note="context: what each further instance adds")
            data[total] = dict(rss_kib=rss, bytes_per_instance=per)
        run.report.detail("memory", data)
    finally:
        p.stop()
