"""Row i. gateway (issue 26): the mDNS gateway (`links[].announce`) against avahi-daemon 0.8's
reflector (`enable-reflector=yes`, `reflect-filters` set to the same types), in the gateway lab
(Tests/integration/test_gateway.py, its own namespaces), one after the other on the same links.

A python-zeroconf responder on the far link registers COUNT instances of 5 types (probing and
announcing like a device), then says goodbye for half of them (scripts/bench/churn.py). On the
client link, one python-zeroconf ServiceBrowser per type watches. Measured for each system:
time from an instance's first announcement on the far link (from a capture there) to the
client's first sight of it (p50/p95), time from its goodbye to its removal on the client
(p95), instances the client never saw, mDNS packets per minute on the client link, the
router's responses in the busiest second (the announcement budget at work), and the CPU
seconds of the proxy and of the router's avahi-daemon."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import lab as L
import probes
import test_gateway as G

SECTION = "i. gateway"
TYPES = ["_bench%d._tcp" % i for i in range(5)]
HERE = os.path.dirname(os.path.abspath(__file__))


def _pct(values, q):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def _far_times(pcap):
    """{instance: (first announcement, first goodbye)} from the far link's capture: responses
    carrying the instance's PTR (TTL > 0), or its PTR with TTL 0."""
    up, down = {}, {}
    for ts, _src, _sp, _dst, _dp, msg in L.dns_packets(pcap):
        if not msg.flags & 0x8000:
            continue
        for rrset in msg.answer:
            if rrset.rdtype != 12:  # PTR
                continue
            for rd in rrset:
                name = str(rd.target).split("._bench")[0].replace("\\032", " ")
                if not name.startswith("Churn"):
                    continue
                if rrset.ttl > 0:
                    up.setdefault(name, ts)
                else:
                    down.setdefault(name, ts)
    return up, down


def _watch_times(paths):
    """{instance: (first +, last -)} from the client watchers' output."""
    seen, gone = {}, {}
    for path in paths:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 3 or parts[0] not in "+-":
                    continue
                name = " ".join(parts[1:-1]).split("._bench")[0]
                t = float(parts[-1])
                if parts[0] == "+":
                    seen.setdefault(name, t)
                else:
                    gone[name] = t
    return seen, gone


def _phase(g, lab_, name, count, interval, log):
    """One system's run; returns its figures."""
    tag = "bench-%s" % name
    caps = {}
    for ns, ifn in ((G.NS_GF, "br-f"), (G.NS_GC, "br-c")):
        path = os.path.join(lab_.dir, "%s-%s.pcap" % (tag, ifn))
        caps[ifn] = (path, subprocess.Popen(
            ["ip", "netns", "exec", ns, "tcpdump", "-i", ifn, "-n", "-U", "-w", path, "udp", "port", "5353"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True))
    watchers, outputs = [], []
    for stype in TYPES:
        out = os.path.join(lab_.dir, "%s-watch-%s.log" % (tag, stype))
        outputs.append(out)
        with open(out, "w") as f:
            watchers.append(subprocess.Popen(
                ["ip", "netns", "exec", G.NS_GC, G.PY, os.path.join(G.HERE, "gateway_browser.py"),
                 "198.51.100.10", stype, "watch"], stdout=f, stderr=subprocess.STDOUT, start_new_session=True))
    L.wait_for(lambda: all("ready" in open(o).read() for o in outputs), 20, what="the client watchers")
    time.sleep(1)
    proxy = lab_.procs.get("gw-proxy")
    avahi = lab_.procs["gw-avahi-r"]
    cpu0 = (probes.cpu_seconds(proxy.pid) if proxy else 0.0, probes.cpu_seconds(avahi.pid))
    started = time.time()
    log("gateway row: %s, %d instances of %d types, then %d goodbyes" % (name, count, len(TYPES), count // 2))
    churn = subprocess.run(
        ["ip", "netns", "exec", G.NS_GF, G.PY, os.path.join(HERE, "churn.py"), "192.0.2.10", ",".join(TYPES),
         str(count), str(interval), "5"], capture_output=True, text=True, timeout=600)
    elapsed = time.time() - started
    cpu1 = (probes.cpu_seconds(proxy.pid) if proxy else 0.0, probes.cpu_seconds(avahi.pid))
    for w in watchers:
        L.kill_pid(w.pid, signal.SIGTERM)
        w.wait(5)
    for _path, p in caps.values():
        L.kill_pid(p.pid, signal.SIGTERM)
        p.wait(5)
    if "done" not in churn.stdout:
        raise RuntimeError("churn.py failed: %s %s" % (churn.stdout[-500:], churn.stderr[-2000:]))
    up, down = _far_times(caps["br-f"][0])
    # Only the goodbyes of the churn: the capture may also hold those of churn.py's close.
    withdrawn = set(next(line for line in churn.stdout.splitlines() if line.startswith("withdrawn "))
                    [len("withdrawn "):].split(","))
    down = {n: t for n, t in down.items() if n in withdrawn}
    seen, gone = _watch_times(outputs)
    first = [seen[n] - up[n] for n in up if n in seen]
    removal = [gone[n] - down[n] for n in down if n in gone and gone[n] >= down[n]]
    client = L.dns_packets(caps["br-c"][0])
    client_packets = len(client)
    # The router's responses over IPv4 (the gateway sends each packet over IPv4 and IPv6), the
    # most in any one second: the announcement budget at work, avahi's answers included.
    times = sorted(ts for ts, src, _sp, _dst, _dp, msg in client if src == "198.51.100.1" and msg.flags & 0x8000)
    peak, start = 0, 0
    for end, ts in enumerate(times):
        while ts - times[start] >= 1.0:
            start += 1
        peak = max(peak, end - start + 1)
    return dict(
        first_p50=_pct(first, 0.5), first_p95=_pct(first, 0.95), removal_p95=_pct(removal, 0.95),
        removal_p50=_pct(removal, 0.5), never_seen=len([n for n in up if n not in seen]),
        not_removed=len([n for n in down if n not in gone]), announced=len(up), goodbyes=len(down),
        packets_per_minute=client_packets * 60.0 / elapsed, seconds=elapsed, peak_per_second=peak,
        proxy_cpu=cpu1[0] - cpu0[0], avahi_cpu=cpu1[1] - cpu0[1])


def run(report, binary, log, smoke=False):
    count = 20 if smoke else 100
    interval = 0.05 if smoke else 0.2
    lab_ = L.Lab()
    os.makedirs(lab_.dir, exist_ok=True)
    os.environ["DISCOVERY_PROXY_BIN"] = binary
    g = G.GatewayLab(lab_)
    results = {}
    try:
        g.start()
        with open(g.config, "w") as f:
            f.write(G.config(TYPES, subtypes=(), log="info"))
        g.start_proxy()
        time.sleep(2)
        results["gateway"] = _phase(g, lab_, "gateway", count, interval, log)
        lab_.stop_proc("gw-proxy")
        time.sleep(3)  # goodbyes
        lab_.stop_proc("gw-avahi-r")
        conf = lab_._avahi_conf("gw-router", ["dgr-f", "dgr-c"], True, publish=True)
        conf = conf.replace("enable-reflector=no", "enable-reflector=yes\nreflect-filters=%s" % ",".join(TYPES))
        lab_.spawn_avahi(G.NS_GR, "gw-avahi-r", conf, (), g.router_dbus("gw"))
        lab_.wait_avahi_on_bus(G.NS_GR, "gw-avahi-r", g.router_dbus("gw"))
        time.sleep(2)
        results["reflector"] = _phase(g, lab_, "reflector", count, interval, log)
    finally:
        g.stop()
        lab_.stop()
    ours, ref = results["gateway"], results["reflector"]
    ms = lambda s: None if s is None else s * 1000.0  # noqa: E731
    report.row(SECTION, "first sight p50, gateway (reflector)", ms(ours["first_p50"]), "ms",
               note="reflector %.0f ms" % ms(ref["first_p50"]) if ref["first_p50"] is not None else "")
    target = None if ref["first_p95"] is None else ms(ref["first_p95"]) + 100
    report.row(SECTION, "first sight p95, gateway", ms(ours["first_p95"]), "ms",
               target="<= reflector + 100 ms (%.0f)" % target if target else "",
               ok=None if target is None or ours["first_p95"] is None else ms(ours["first_p95"]) <= target,
               note="reflector %.0f ms" % ms(ref["first_p95"]) if ref["first_p95"] is not None else "")
    report.row(SECTION, "removal p95, gateway", ms(ours["removal_p95"]), "ms", target="<= 2000",
               ok=None if ours["removal_p95"] is None else ours["removal_p95"] <= 2.0,
               note="reflector %s ms" % ("%.0f" % ms(ref["removal_p95"]) if ref["removal_p95"] is not None else "-"))
    report.row(SECTION, "instances never seen / not removed, gateway", "%d / %d" % (ours["never_seen"], ours["not_removed"]),
               target="0 / 0", ok=ours["never_seen"] == 0 and ours["not_removed"] == 0,
               note="of %d / %d; reflector %d / %d" % (ours["announced"], ours["goodbyes"], ref["never_seen"], ref["not_removed"]))
    report.row(SECTION, "mDNS packets per minute on the client link, gateway", ours["packets_per_minute"], "",
               target="<= reflector (%.0f)" % ref["packets_per_minute"],
               ok=ours["packets_per_minute"] <= ref["packets_per_minute"])
    budget = 20 + 40  # mdns-announce-rate + mdns-announce-burst, the defaults
    report.row(SECTION, "router's mDNS responses in the busiest second, IPv4, gateway", ours["peak_per_second"], "",
               target="<= %d (announce budget)" % budget, ok=ours["peak_per_second"] <= budget,
               note="reflector %d" % ref["peak_per_second"])
    report.row(SECTION, "CPU seconds, proxy + router avahi, gateway", ours["proxy_cpu"] + ours["avahi_cpu"], "s",
               note="proxy %.2f, avahi %.2f; reflector's avahi %.2f" % (ours["proxy_cpu"], ours["avahi_cpu"], ref["avahi_cpu"]))
    report.detail("gateway", results)
