#!/usr/bin/python3
"""Issue 45: the mDNS gateway (`links[].announce`) with a crowd of far devices, beside
avahi-daemon 0.8's reflector, in the gateway lab (Tests/integration/test_gateway.py).

    DPT_LAB_ID=gs DISCOVERY_PROXY_BIN=<exe> /usr/bin/python3 scripts/bench/gateway_scale.py \
        --count 1000 --seconds 60 [--system gateway|reflector|direct|both] [--type _ipp._tcp] \
        [--sample 50] [--announce-burst PACKETS] [--churn F,S,R] [--json OUT]

Each system runs on a lab of its own, started fresh, one after the other (`both`: the gateway,
then the reflector). In each:

* The router's avahi-daemon runs with the [server] settings deploy/avahi recommends
  (objects-per-client-max, cache-entries-max: read from avahi-daemon.conf.snippet), and
  with `enable-reflector=yes` and `reflect-filters=<type>` for the reflector.
* gateway: the proxy announces the far link's <type> on the client link (test_gateway's
  configuration, log level info, no subtypes). reflector: no proxy. direct: no proxy, no
  reflector, and the crowd plays on the client link itself (from the router's port of it;
  the router's avahi-daemon does not hear it there, multicast loopback being off): what the
  python-zeroconf client manages with no router in the way, its own ceiling.
* On the client link, crowd_watch.py (a python-zeroconf ServiceBrowser) notes the time it
  first sees each instance. Once every process has settled, the crowd (Tests/integration/
  crowd.py, COUNT devices) starts on the far link beside the far avahi responder and
  announces every device twice, 1 s apart; its first announcement is time zero.
* After --seconds: instances seen within 10 s, 20 s and --seconds; first-sight p50 and p95
  (over all COUNT devices: one never seen counts as later than any); the watcher resolves a
  sample of the instances it saw, checked against the crowd's data (port, host, address,
  TXT); CPU seconds (utime + stime from /proc) of the proxy (since its start, and over the
  measured window), the router's avahi-daemon, the watcher and the crowd over the window;
  the proxy log's warning and error lines (the 3 most frequent messages);
  gateway_publish_errors_total and gateway_announced_instances from the admin /metrics;
  notable lines of the router's avahi-daemon log.

--churn F,S,R (issue 45's "10 % of the 1,000 leave and return every minute for 10 minutes":
0.1,60,10) has the crowd churn (crowd.py's --churn-*: in round r, S * r s after time zero,
a fraction F of the devices, a different set each round, say goodbye, and S / 2 s later they
return and announce again), and the run lasts (R + 1) * S - 1 s (or --seconds, if longer).
Besides the figures above, from the crowd's leave and return lines and the watcher's removed
and added lines: for each leave the time until the watcher saw the instance removed, for each
return the time until it saw it again (p50, p95, max; how many not within 2 s, how many
never); removals and additions the crowd did not cause; the instances stale at the end (the
watcher's set against the crowd's); the CPU seconds of the proxy and of the router's
avahi-daemon in each period (period 0: time zero to 1 s before the first leave; period r: 1 s
before leave r to 1 s before the next leave or the end) and their RSS (VmRSS) at the end of
each, listed under the table so that flatness can be judged.

The figures are printed side by side, beside the issue's targets: >= 95% seen within 10 s;
p95 first sight within the reflector's + 1 s (when both run); proxy CPU over the whole run
<= 5 s; no errors. --json writes the figures and every instance's first sight.

Only the lab's own namespaces (dpt-<DPT_LAB_ID>-gr, -gf, -gc) and documentation addresses are
used; the lab is torn down at the end, on an error and on SIGTERM. DPT_LAB_ID defaults to
"gs" here, so that the script never takes over the default lab's namespaces. DPT_KEEP_LOGS=1
keeps each lab's directory (its path is printed).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import signal
import sys
import time

os.environ.setdefault("DPT_LAB_ID", "gs")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "Tests", "integration"))
sys.path.insert(0, HERE)

import crowd as C  # noqa: E402
import lab as L  # noqa: E402
import probes  # noqa: E402
import test_gateway as G  # noqa: E402

SNIPPET = os.path.join(REPO, "deploy", "avahi", "avahi-daemon.conf.snippet")
WINDOWS = (10.0, 20.0)           # seen-within marks besides --seconds
TARGET_SEEN_10S = 95           # percent
TARGET_P95_OVER_REFLECTOR = 1.0
TARGET_PROXY_CPU = 5.0
READY_TIMEOUT = 30.0
RESOLVE_TIMEOUT = 60.0
TARGET_CHURN_SEEN = 2.0          # seconds from a leave or return to the watcher's seeing it
CHURN_SLACK = 0.05               # a watcher line up to this much before the crowd's is its answer


def log(text):
    print(text, file=sys.stderr, flush=True)


def deploy_server_settings(base_conf):
    """The active [server] lines of deploy/avahi's snippet that the lab's avahi-daemon.conf
    does not set already (objects-per-client-max, cache-entries-max): the settings a router
    running the proxy is told to use. The snippet's other sections say what the lab's
    configuration says already (wide-area off, no workstation or HINFO, reflector off)."""
    have = {line.split("=", 1)[0] for line in base_conf.splitlines() if "=" in line}
    section, out = None, []
    with open(SNIPPET) as f:
        for raw in f:
            line = raw.strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "server" and line and not line.startswith("#") and "=" in line:
                if line.split("=", 1)[0] not in have:
                    out.append(line)
    return out


def router_avahi_conf(reflect_type=None):
    """The router's avahi-daemon.conf: the gateway lab's, with deploy/avahi's settings, and
    the reflector on for `reflect_type` when given."""
    args = ("gw-router", ["dgr-f", "dgr-c"], True)
    conf = L.Lab._avahi_conf(*args, publish=True)
    conf = L.Lab._avahi_conf(*args, publish=True, extra=deploy_server_settings(conf))
    if reflect_type:
        conf = conf.replace("enable-reflector=no", "enable-reflector=yes\nreflect-filters=%s" % reflect_type)
    return conf


def wait_line(lab_, name, pattern, timeout):
    """The first match of `pattern` in process `name`'s log, waiting up to `timeout` s; fails
    at once if the process exits without printing it."""
    deadline = time.monotonic() + timeout
    while True:
        found = re.search(pattern, lab_.log_text(name, tail=10 ** 6), re.MULTILINE)
        if found:
            return found
        lab_.check_alive(name)
        if time.monotonic() >= deadline:
            raise TimeoutError("no %r in %s's output after %.0f s:\n%s" % (
                pattern, name, timeout, lab_.log_text(name, tail=20)))
        time.sleep(0.2)


def sightings(text, prefix):
    """{k: time} of the watcher's first sight of each crowd instance."""
    out = {}
    pat = re.compile(r"^seen (\S+) %s (\d{4})\." % re.escape(prefix))
    for line in text.splitlines():
        m = pat.match(line)
        if m:
            out.setdefault(int(m.group(2)), float(m.group(1)))
    return out


def rss_mib(pid, field="VmRSS"):
    """A process's resident set (`field` of /proc/PID/status: VmRSS, or VmHWM for its peak) in
    MiB; None if it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def churn_events(text, prefix, words):
    """[(time, k, word)] of the lines `WORD T <prefix> NNNN...` in `text`, `word` in `words`,
    sorted by time."""
    pat = re.compile(r"^(%s) (\S+) %s (\d{4})\b" % ("|".join(words), re.escape(prefix)))
    out = []
    for line in text.splitlines():
        m = pat.match(line)
        if m:
            out.append((float(m.group(2)), int(m.group(3)), m.group(1)))
    return sorted(out)


def churn_figures(crowd_text, watch_text, prefix, count, t_end):
    """The churn figures: the crowd's leave and return lines matched with the watcher's
    removed and added (or first seen) lines, instance by instance, up to `t_end`."""
    crowd = collections.defaultdict(list)     # k -> [(t, "leave" | "return")]
    for t, k, word in churn_events(crowd_text, prefix, ("leave", "return")):
        if t <= t_end:
            crowd[k].append((t, word))
    watch = collections.defaultdict(list)     # k -> [(t, "seen" | "added" | "removed")]
    for t, k, word in churn_events(watch_text, prefix, ("seen", "added", "removed")):
        if t <= t_end:
            watch[k].append((t, word))
    removals, returns, matched = [], [], set()
    unremoved_returns = 0
    for k, events in crowd.items():
        for i, (t, word) in enumerate(events):
            until = events[i + 1][0] if i + 1 < len(events) else t_end
            wanted = ("removed",) if word == "leave" else ("seen", "added")
            since = events[i - 1][0] if i else 0.0     # a return's leave
            hit = next((w for w in watch[k] if w[1] in wanted and t - CHURN_SLACK <= w[0] < until), None)
            if hit is not None:
                matched.add((k,) + hit)
            delay = float("inf") if hit is None else max(0.0, hit[0] - t)
            if word == "leave":
                removals.append(delay)
            elif hit is None and not any(w[1] == "removed" and since - CHURN_SLACK <= w[0] < until for w in watch[k]):
                unremoved_returns += 1   # the watcher never lost it: nothing to see again
            else:
                returns.append(delay)
    unmatched = collections.Counter(w[1] for k, ws in watch.items() for w in ws
                                    if w[1] != "seen" and (k,) + w not in matched)
    crowd_has = {k for k in range(count) if not crowd[k] or crowd[k][-1][1] == "return"}
    watcher_has = {k for k, ws in watch.items() if ws and ws[-1][1] != "removed"}

    def stats(delays):
        delays = sorted(delays)
        return {"n": len(delays),
                "p50": percentile(delays, 50) if delays else None,
                "p95": percentile(delays, 95) if delays else None,
                "max": (None if delays[-1] == float("inf") else delays[-1]) if delays else None,
                "late": sum(1 for d in delays if d > TARGET_CHURN_SEEN),
                "never": sum(1 for d in delays if d == float("inf"))}
    return {"leaves": len(removals), "returns": sum(1 for ev in crowd.values() for _t, w in ev if w == "return"),
            "removal": stats(removals), "readd": stats(returns), "unremoved_returns": unremoved_returns,
            "uncaused_removals": unmatched["removed"], "uncaused_additions": unmatched["added"],
            "stale": sorted(watcher_has - crowd_has), "missing": sorted(crowd_has - watcher_has),
            "removal_delays": [None if d == float("inf") else round(d, 3) for d in removals],
            "readd_delays": [None if d == float("inf") else round(d, 3) for d in returns]}


def percentile(sorted_values, pct):
    """Nearest-rank percentile (`pct` in whole percent); None when it falls on an instance
    never seen."""
    v = sorted_values[max(0, -(-pct * len(sorted_values) // 100) - 1)]
    return None if v == float("inf") else v


def check_resolution(info, prefix, first_addr):
    """'' when a resolved sample matches the crowd's device, else what differs."""
    k = int(re.match(r"%s (\d{4})\." % re.escape(prefix), info["name"]).group(1))
    if not info["resolved"]:
        return "not resolved"
    want = {"port": C.BASE_PORT + k, "address": C.device_address(first_addr, k),
            "txt": (b"\x08dev=%04d" % k).hex(), "host": "%s-%04d" % (prefix.lower(), k)}
    wrong = []
    if info["port"] != want["port"]:
        wrong.append("port %s" % info["port"])
    if want["address"] not in info["addresses"]:
        wrong.append("addresses %s" % info["addresses"])
    if info["txt"] != want["txt"]:
        wrong.append("txt %s" % info["txt"])
    if not (info["server"] or "").lower().startswith(want["host"]):
        wrong.append("server %s" % info["server"])
    return ", ".join(wrong)


PROXY_LINE = re.compile(r"^\S+ (warning|error|critical) [^:]*:.*?\[\w+\] (.*)$")


def proxy_log_problems(text):
    """(warnings, errors, [(count, level, message)] the 3 most frequent) of a proxy log."""
    counts = collections.Counter()
    levels = collections.Counter()
    for line in text.splitlines():
        m = PROXY_LINE.match(line)
        if m:
            levels[m.group(1)] += 1
            counts[(m.group(1), m.group(2))] += 1
    top = [(n, level, message) for (level, message), n in counts.most_common(3)]
    return levels["warning"], levels["error"] + levels["critical"], top


AVAHI_NOTABLE = re.compile(r"(?i)fail|error|too many|refus|exceed|limit|invalid|drop|full|warn")
AVAHI_USUAL = ("WARNING: No NSS support for mDNS detected",)


def avahi_log_problems(text):
    """(count, [(count, line)] the 3 most frequent) of the notable lines of the router's
    avahi-daemon log since its last start."""
    text = text[text.rfind("starting up"):]
    lines = collections.Counter(line for line in text.splitlines()
                                if AVAHI_NOTABLE.search(line) and not line.startswith(AVAHI_USUAL))
    return sum(lines.values()), [(n, line) for line, n in lines.most_common(3)]


def metric(text, name):
    """The sum of a metric's samples (all label sets) in Prometheus text; None if absent."""
    values = re.findall(r"^%s(?:\{[^}]*\})?\s+([\d.e+-]+)" % re.escape(name), text, re.MULTILINE)
    return sum(float(v) for v in values) if values else None


def avahi_browse_count(g, stype, prefix):
    """How many of the crowd's instances `avahi-browse -t` lists on the client link (its
    avahi-daemon, own D-Bus; no resolving)."""
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=g.dbus_c)
    r = L.nsrun(G.NS_GC, ["avahi-browse", "-t", "-p", stype], check=False, env=env, timeout=60)
    names = {L.avahi_unescape(f[3]) for f in (line.split(";") for line in r.stdout.splitlines())
             if f[0] == "+" and len(f) > 3}
    return sum(1 for name in names if name.startswith(prefix))


def far_queries(packets, router, t0):
    """The router's mDNS query packets on the far link, per second from the crowd's
    announcement: total, the busiest second, seconds over the 20 a second of RFC 8766 §9.3,
    and the last second with any (both IP protocols)."""
    per = collections.Counter(int(ts - t0) for ts, src, _sp, _dst, _dp, msg in packets
                              if src in router and not msg.flags & 0x8000 and ts >= t0)
    return {"total": sum(per.values()), "busiest": max(per.values(), default=0),
            "over_20": sum(1 for n in per.values() if n > 20), "last": max(per, default=None),
            "per_second": [per.get(k, 0) for k in range(max(per, default=-1) + 1)]}


def run_system(system, args):
    """One system's run on a fresh lab; returns its figures."""
    lab_ = L.Lab()
    g = G.GatewayLab(lab_)
    try:
        log("[%s] starting the lab (%s)" % (system, lab_.dir))
        g.start()
        lab_.stop_proc("gw-avahi-r")
        lab_.spawn_avahi(G.NS_GR, "gw-avahi-r", router_avahi_conf(args.type if system == "reflector" else None),
                         (), g.router_dbus("gw"))
        lab_.wait_avahi_on_bus(G.NS_GR, "gw-avahi-r", g.router_dbus("gw"))
        pids = {"router avahi": lab_.procs["gw-avahi-r"].pid}
        if system == "gateway":
            with open(g.config, "w") as f:
                f.write(G.config((args.type,), subtypes=(), log="info"))
                if args.announce_burst is not None:
                    f.write("mdns-announce-burst: %d\n" % args.announce_burst)
            g.start_proxy()
            pids["proxy"] = lab_.procs["gw-proxy"].pid
        settled = probes.settle(list(pids.values()))
        # The router's own queries on the far link (what the gateway's lookups cost there).
        far_capture = G.capture(lab_, "gs-far", ns=G.NS_GR, iface="dgr-f")
        router_far = {"192.0.2.1"} | set(re.findall(r"inet6 (\S+)/", L.nsrun(G.NS_GR, [
            "ip", "-6", "-o", "addr", "show", "dev", "dgr-f"]).stdout))
        watch = lab_.spawn(G.NS_GC, [G.PY, os.path.join(HERE, "crowd_watch.py"), "198.51.100.10", args.type,
                                     str(args.sample), str(run_seconds(args) + 300)], "gs-watch")
        pids["watcher"] = watch.pid
        wait_line(lab_, "gs-watch", r"^ready ", READY_TIMEOUT)
        time.sleep(1)   # the browser's first queries are out and answered (nothing to find yet)
        cpu0 = {name: probes.cpu_seconds(pid) for name, pid in pids.items()}
        ns, iface = (G.NS_GR, "dgr-c") if system == "direct" else (G.NS_GF, "br-f")
        churn = []
        if args.churn is not None:
            churn = ["--churn-fraction", "%g" % args.churn[0], "--churn-period", "%g" % args.churn[1],
                     "--churn-rounds", "%d" % args.churn[2]]
        crowd = lab_.spawn(ns, [G.PY, os.path.join(REPO, "Tests", "integration", "crowd.py"), "--iface", iface,
                                "--type", args.type, "--count", str(args.count), "--prefix", args.prefix,
                                "--first-addr", args.first_addr] + churn, "gs-crowd")
        pids["crowd"] = crowd.pid
        cpu0["crowd"] = 0.0
        t0 = float(wait_line(lab_, "gs-crowd", r"^crowd: announced (\S+)", READY_TIMEOUT).group(1))
        log("[%s] crowd of %d announced at %.3f (settled after %.1f s)" % (system, args.count, t0, settled))
        marks = sorted({m for m in WINDOWS if m < args.seconds} | {args.seconds})
        timeline = [(mark, "mark") for mark in marks]
        periods = []    # [(seconds after t0, {name: CPU s so far}, {name: RSS MiB})]
        if args.churn is not None:
            period, rounds = args.churn[1], args.churn[2]
            ends = [r * period - 1 for r in range(1, rounds + 1)] + [run_seconds(args)]
            timeline = sorted(timeline + [(end, "period") for end in ends])
            periods.append((None, cpu0, {name: rss_mib(pid) for name, pid in pids.items() if name != "crowd"}))
        for mark, kind in timeline:
            time.sleep(max(0.0, t0 + mark - time.time()))
            for name in ("gs-crowd", "gs-watch") + (("gw-proxy",) if system == "gateway" else ()):
                lab_.check_alive(name)
            if kind == "period":
                periods.append((mark, {name: probes.cpu_seconds(pid) for name, pid in pids.items()},
                                {name: rss_mib(pid) for name, pid in pids.items() if name != "crowd"}))
                who = "proxy" if system == "gateway" else "router avahi"
                log("[%s] %4.0f s: %s CPU %.2f s in the period, RSS %.1f MiB" % (
                    system, mark, who, periods[-1][1][who] - periods[-2][1][who], periods[-1][2][who]))
                continue
            seen = sightings(lab_.log_text("gs-watch", tail=100000), args.prefix)
            log("[%s] %4.0f s: %d of %d seen" % (system, mark, len(seen), args.count))
            if mark == 10.0:
                # The client link's own avahi-daemon, asked then: what its cache took in.
                avahi_seen = avahi_browse_count(g, args.type, args.prefix)
                log("[%s] %4.0f s: avahi-browse on the client link lists %d" % (system, mark, avahi_seen))
        t_end = time.time()
        cpu1 = {name: probes.cpu_seconds(pid) for name, pid in pids.items()}
        result = {"system": system, "count": args.count, "seconds": args.seconds, "announced_at": t0,
                  "avahi_browse_10s": avahi_seen if 10.0 in marks else None,
                  "cpu_window": {name: cpu1[name] - cpu0[name] for name in pids}, "cpu_proxy_total": None}
        result["far_queries"] = far_queries(far_capture(), router_far, t0)
        if system == "gateway":
            result["cpu_proxy_total"] = cpu1["proxy"]
            metrics = g.get("/metrics")
            result["publish_errors"] = metric(metrics, "gateway_publish_errors_total")
            result["announced_instances"] = metric(metrics, "gateway_announced_instances")
            routes = json.loads(g.get("/api/services"))["announcements"]
            result["held_back"] = sum(len(r["heldBack"]) for r in routes)
        if args.churn is not None:
            result["churn"] = churn_figures(lab_.log_text("gs-crowd", tail=10 ** 7),
                                            lab_.log_text("gs-watch", tail=10 ** 7), args.prefix, args.count, t_end)
            result["churn"]["crowd_done"] = "crowd: churn done" in lab_.log_text("gs-crowd", tail=10 ** 7)
            result["churn"]["period_cpu"] = {
                name: [round(b[1][name] - a[1][name], 3) for a, b in zip(periods, periods[1:])] for name in pids}
            result["churn"]["period_rss_mib"] = {name: [None if p[2].get(name) is None else round(p[2][name], 1)
                                                        for p in periods] for name in pids if name != "crowd"}
            result["churn"]["period_ends"] = [p[0] for p in periods[1:]]
            c = result["churn"]
            log("[%s] churn: %d leaves, %d returns; removals never seen %d, re-additions never seen %d; "
                "stale %d, missing %d" % (system, c["leaves"], c["returns"], c["removal"]["never"],
                                          c["readd"]["never"], len(c["stale"]), len(c["missing"])))
        L.kill_pid(watch.pid, signal.SIGUSR1)
        wait_line(lab_, "gs-watch", r"^done$", RESOLVE_TIMEOUT)
        watch_text = lab_.log_text("gs-watch", tail=1000000)
        seen = sightings(watch_text, args.prefix)
        first = {k: t - t0 for k, t in seen.items()}
        delays = sorted(list(first.values()) + [float("inf")] * (args.count - len(first)))
        result.update(
            seen_within={"%g" % m: sum(1 for d in delays if d <= m) for m in marks},
            first_p50=percentile(delays, 50), first_p95=percentile(delays, 95),
            first_sight={"%04d" % k: round(d, 3) for k, d in sorted(first.items())},
            watcher_other_lines=[line for line in watch_text.splitlines()
                                 if not line.startswith(("seen ", "ready ", "resolved ", "done", "removed ",
                                                         "added "))][:20])
        samples = [json.loads(line[len("resolved "):]) for line in watch_text.splitlines()
                   if line.startswith("resolved ")]
        samples = [s for s in samples if re.match(r"%s \d{4}\." % re.escape(args.prefix), s["name"])]
        problems = {s["name"]: check_resolution(s, args.prefix, args.first_addr) for s in samples}
        result["resolved_ok"] = sum(1 for p in problems.values() if not p)
        result["resolved_sample"] = len(samples)
        result["resolve_problems"] = collections.Counter(
            re.sub(r"\d", "#", p) for p in problems.values() if p).most_common(3)
        if system == "gateway":
            result["proxy_warnings"], result["proxy_errors"], result["proxy_top"] = \
                proxy_log_problems(lab_.log_text("gw-proxy", tail=10 ** 7))
        result["avahi_notable"], result["avahi_top"] = avahi_log_problems(lab_.log_text("gw-avahi-r", tail=10 ** 7))
        return result
    finally:
        lab_.stop_proc("gs-watch")
        lab_.stop_proc("gs-crowd")
        g.stop()
        lab_.stop()
        if os.environ.get("DPT_KEEP_LOGS"):
            log("[%s] logs kept in %s" % (system, lab_.dir))


def _secs(v):
    """A first-sight figure: None is a percentile that falls on an instance never seen."""
    return "never" if v is None else "%.3f s" % v


def _num(v, fmt="%.2f"):
    return "-" if v is None else fmt % v


def table(results, args):
    """The figures side by side, the issue's targets and whether the gateway meets them."""
    names = [r["system"] for r in results]
    by = {r["system"]: r for r in results}
    gw, ref = by.get("gateway"), by.get("reflector")
    rows = []   # (metric, {system: text}, target, met)

    def row(metric, fmt, target="", met=None):
        rows.append((metric, {n: fmt(by[n]) for n in names}, target, met))

    count = args.count
    for mark in results[0]["seen_within"]:
        target, met = "", None
        if mark == "10":
            need = -(-TARGET_SEEN_10S * count // 100)
            target = ">= 95%% (%d)" % need
            met = None if gw is None else gw["seen_within"][mark] >= need
        row("seen within %s s" % mark,
            lambda r, m=mark: "%d (%.1f%%)" % (r["seen_within"][m], 100.0 * r["seen_within"][m] / count), target, met)
    row("avahi-browse on the client link at 10 s", lambda r: _num(r.get("avahi_browse_10s"), "%d"),
        ">= 95%% (%d)" % -(-TARGET_SEEN_10S * count // 100),
        None if gw is None or gw.get("avahi_browse_10s") is None
        else gw["avahi_browse_10s"] >= -(-TARGET_SEEN_10S * count // 100))
    row("first sight p50", lambda r: _secs(r["first_p50"]))
    target, met = "", None
    if ref is not None:
        limit = None if ref["first_p95"] is None else ref["first_p95"] + TARGET_P95_OVER_REFLECTOR
        target = "<= reflector + 1 s (%s)" % _secs(limit)
        if gw is not None:
            met = limit is not None and gw["first_p95"] is not None and gw["first_p95"] <= limit
    row("first sight p95", lambda r: _secs(r["first_p95"]), target, met)
    row("sample resolved and correct", lambda r: "%d of %d" % (r["resolved_ok"], r["resolved_sample"]))
    row("CPU s, proxy since its start", lambda r: _num(r["cpu_proxy_total"]),
        "<= %.0f" % TARGET_PROXY_CPU, None if gw is None else gw["cpu_proxy_total"] <= TARGET_PROXY_CPU)
    for label, who in (("proxy", "proxy"), ("router avahi-daemon", "router avahi"),
                       ("watcher (python-zeroconf)", "watcher"), ("crowd", "crowd")):
        row("CPU s, %s, window" % label, lambda r, w=who: _num(r["cpu_window"].get(w)))
    row("proxy log warnings / errors", lambda r: "%s / %s" % (_num(r.get("proxy_warnings"), "%d"),
                                                             _num(r.get("proxy_errors"), "%d")),
        "0 errors", None if gw is None else gw["proxy_errors"] == 0)
    row("gateway_publish_errors_total", lambda r: _num(r.get("publish_errors"), "%d"),
        "0", None if gw is None else gw["publish_errors"] == 0)
    row("announced (metric) / held back", lambda r: "%s / %s" % (_num(r.get("announced_instances"), "%d"),
                                                                _num(r.get("held_back"), "%d")))
    row("router avahi: notable log lines", lambda r: "%d" % r["avahi_notable"])
    row("far link, router's query packets: total / busiest s / s over 20 / last s",
        lambda r: "%d / %d / %d / %s" % (r["far_queries"]["total"], r["far_queries"]["busiest"],
                                         r["far_queries"]["over_20"], _num(r["far_queries"]["last"], "%d")))
    head0 = "%d devices of %s, %g s" % (count, args.type, args.seconds)
    extra = []
    if args.churn is not None:
        head0 = "%d devices of %s, churn %g,%g,%d, %g s" % (count, args.type, args.churn[0], args.churn[1],
                                                           args.churn[2], run_seconds(args))
        extra = churn_rows(row, gw, results)

    head = (head0,) + tuple(names) + ("target (gateway)", "met")
    lines = [(m,) + tuple(v[n] for n in names) + (t, MET[ok]) for m, v, t, ok in rows]
    out = aligned(head, lines)
    for r in results:
        out += log_tops(r)
        for problem, n in r["resolve_problems"]:
            out.append("%s: resolution, %d x: %s" % (r["system"], n, problem))
        for line in r["watcher_other_lines"][:5]:
            out.append("%s: watcher said: %s" % (r["system"], line))
    return "\n".join(out + extra)


MET = {True: "yes", False: "NO", None: ""}


def aligned(head, lines):
    """`head` and `lines` (tuples of one length) as text columns, a rule under the head."""
    widths = [max(len(str(x[i])) for x in [head] + lines) for i in range(len(head))]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    return [(fmt % head).rstrip(), "  ".join("-" * w for w in widths)] + [(fmt % line).rstrip() for line in lines]


def log_tops(r):
    """A run's most frequent proxy and router avahi-daemon log lines, one text line each."""
    return (["%s: proxy log, %d x %s: %s" % (r["system"], n, level, message)
             for n, level, message in r.get("proxy_top", [])]
            + ["%s: router avahi log, %d x: %s" % (r["system"], n, line) for n, line in r["avahi_top"]])


def _list(values, fmt):
    return " ".join("-" if v is None else fmt % v for v in values)


def churn_rows(row, gw, results):
    """Adds the churn rows to the table (through `row`); returns the lines to print under it:
    the CPU and RSS of each period, and the stale instances."""
    limit = TARGET_CHURN_SEEN

    def spread(key):
        def text(r):
            s = r["churn"][key]
            return "%s / %s / %s" % (_secs(s["p50"]), _secs(s["p95"]), _secs(s["max"])) if s["n"] else "-"
        return text

    def late(key):
        return lambda r: "%d (%d never) of %d" % (r["churn"][key]["late"], r["churn"][key]["never"],
                                                  r["churn"][key]["n"])
    gc = None if gw is None else gw["churn"]
    row("churn: leaves / returns", lambda r: "%d / %d%s" % (r["churn"]["leaves"], r["churn"]["returns"],
                                                            "" if r["churn"]["crowd_done"] else " (crowd not done)"))
    row("churn: removal seen after, p50 / p95 / max", spread("removal"), "max <= %g s" % limit,
        None if gc is None else gc["removal"]["max"] is not None and gc["removal"]["max"] <= limit)
    row("churn: removals not seen within %g s" % limit, late("removal"), "0",
        None if gc is None else gc["removal"]["late"] == 0)
    row("churn: re-addition seen after, p50 / p95 / max", spread("readd"), "max <= %g s" % limit,
        None if gc is None else gc["readd"]["max"] is not None and gc["readd"]["max"] <= limit)
    row("churn: re-additions not seen within %g s" % limit, late("readd"), "0",
        None if gc is None else gc["readd"]["late"] == 0)
    row("churn: returns never removed by the watcher", lambda r: "%d" % r["churn"]["unremoved_returns"])
    row("churn: removals / additions not caused by the crowd",
        lambda r: "%d / %d" % (r["churn"]["uncaused_removals"], r["churn"]["uncaused_additions"]), "0 / 0",
        None if gc is None else gc["uncaused_removals"] == 0 and gc["uncaused_additions"] == 0)
    row("churn: at the end, stale / missing", lambda r: "%d / %d" % (len(r["churn"]["stale"]),
                                                                     len(r["churn"]["missing"])),
        "0 / 0", None if gc is None else not gc["stale"] and not gc["missing"])
    for label, who in (("proxy", "proxy"), ("router avahi-daemon", "router avahi")):
        def cpu(r, w=who):
            v = r["churn"]["period_cpu"].get(w)
            return "-" if v is None or len(v) < 2 else "%.2f / %.2f" % (min(v[1:]), max(v[1:]))

        def rss(r, w=who):
            v = [x for x in r["churn"]["period_rss_mib"].get(w, [])[1:] if x is not None]
            return "-" if not v else "%.1f / %.1f / %.1f" % (v[0], v[-1], max(v))
        row("churn: CPU s per churn period, %s, min / max" % label, cpu, "flat")
        row("churn: RSS MiB, %s, period 0 / last / max" % label, rss, "flat")
    out = []
    for r in results:
        c = r["churn"]
        out.append("%s: periods end at %s s" % (r["system"], _list(c["period_ends"], "%g")))
        for label, who in (("proxy", "proxy"), ("router avahi-daemon", "router avahi"), ("watcher", "watcher"),
                           ("crowd", "crowd")):
            if who in c["period_cpu"]:
                out.append("%s: CPU s per period (0 = announcements), %s: %s" % (
                    r["system"], label, _list(c["period_cpu"][who], "%.2f")))
        for label, who in (("proxy", "proxy"), ("router avahi-daemon", "router avahi"), ("watcher", "watcher")):
            if who in c["period_rss_mib"]:
                out.append("%s: RSS MiB before the crowd, then at each period's end, %s: %s" % (
                    r["system"], label, _list(c["period_rss_mib"][who], "%.1f")))
        for what in ("stale", "missing"):
            if c[what]:
                out.append("%s: %s at the end (%d): %s" % (r["system"], what, len(c[what]),
                                                           " ".join("%04d" % k for k in c[what][:20])))
    return out


def run_seconds(args):
    """How long a run lasts after time zero: --seconds, or with --churn F,S,R until 1 s before
    the round after the last ((R + 1) * S - 1), if that is longer."""
    if args.churn is None:
        return args.seconds
    return max(args.seconds, (args.churn[2] + 1) * args.churn[1] - 1)


def parse_churn(text):
    """--churn F,S,R -> (fraction, period seconds, rounds)."""
    try:
        f, s, r = text.split(",")
        value = (float(f), float(s), int(r))
    except ValueError:
        raise argparse.ArgumentTypeError("--churn takes FRACTION,PERIOD,ROUNDS, e.g. 0.1,60,10") from None
    if not 0 < value[0] <= 1 or not 10 <= value[1] <= 600 or not 1 <= value[2] <= 100:
        raise argparse.ArgumentTypeError("--churn: fraction above 0 and at most 1, period 10 to 600 s, "
                                         "rounds 1 to 100")
    return value


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=1000, help="far devices (1 to 9999)")
    ap.add_argument("--seconds", type=float, default=60.0, help="measured from the crowd's first announcement")
    ap.add_argument("--system", choices=("gateway", "reflector", "direct", "both"), default="both")
    ap.add_argument("--type", default="_ipp._tcp", help="the crowd's service type")
    ap.add_argument("--prefix", default="Crowd")
    ap.add_argument("--first-addr", default="192.0.2.20",
                    help="the crowd's first address: in the far link's 192.0.2.0/24, above the lab's .1, .2, .10")
    ap.add_argument("--sample", type=int, default=50, help="instances the watcher resolves at the end")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--announce-burst", type=int, metavar="PACKETS",
                    help="the proxy's mdns-announce-burst (default: the proxy's default, 40)")
    ap.add_argument("--churn", type=parse_churn, metavar="F,S,R",
                    help="churn: a fraction F of the devices leave and return in each of R rounds, S s apart")
    args = ap.parse_args(argv)
    if not 1 <= args.count <= 9999 or not 10 <= args.seconds <= 600:
        ap.error("--count must be 1 to 9999 and --seconds 10 to 600")
    head = {"count": args.count, "seconds": args.seconds, "type": args.type}
    if args.churn is not None:
        head["churn"] = {"fraction": args.churn[0], "period": args.churn[1], "rounds": args.churn[2],
                         "run_seconds": run_seconds(args)}
    return run_all(ap, args, run_system, table, head)


def run_all(ap, args, run_system, table, head):
    """Runs each system --system names (both: the gateway, then the reflector) on a lab of its
    own, prints the table, and writes --json: `head`, the load at the start, the proxy binary
    and the results. Also gateway_links.py's."""
    systems = ["gateway", "reflector"] if args.system == "both" else [args.system]
    if "gateway" in systems and not os.access(L.Lab.proxy_bin(), os.X_OK):
        ap.error("no proxy binary at %s: set DISCOVERY_PROXY_BIN" % L.Lab.proxy_bin())
    # SIGTERM (a CI timeout, a kill) still runs each lab's teardown in run_system's finally.
    signal.signal(signal.SIGTERM, lambda *_a: sys.exit(143))
    load = os.getloadavg()
    results = [run_system(system, args) for system in systems]
    print("load average at the start: %.2f %.2f %.2f, %d CPUs" % (load + (os.cpu_count(),)))
    print(table(results, args))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(head, load_at_start=load, proxy_bin=L.Lab.proxy_bin() if "gateway" in systems else None,
                           results=results), f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
