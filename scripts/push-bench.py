#!/usr/bin/python3
"""DNS Push measurements in the network-namespace lab (Tests/integration/lab.py).

    sudo DPT_LAB_ID=p6 DISCOVERY_PROXY_BIN=.build/release/discovery-proxy \\
        /usr/bin/python3 scripts/push-bench.py latency --changes 20
    sudo DPT_LAB_ID=p6 ... /usr/bin/python3 scripts/push-bench.py load --sessions 1000 --subscriptions 5

latency: one TLS session subscribes to a service type; a service of that type is published
and withdrawn on far link 1 (avahi static service file written / removed) CHANGES times;
prints the time from each change to the PUSH carrying it (p50, p95, max).

load: SESSIONS concurrent TLS sessions, each holding SUBSCRIPTIONS subscriptions (spread over
service types, so browses are shared), held for --hold seconds while a UDP client measures
cache-hit answer times (p50, p99, max) with --queries sequential queries. Everything is
bounded in count and time; the lab is torn down at the end.
"""

import argparse
import asyncio
import os
import resource
import ssl
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "Tests", "integration"))

import dns.message  # noqa: E402
import dns.name  # noqa: E402
import dns.query  # noqa: E402
import dns.rdatatype as T  # noqa: E402

import dso  # noqa: E402
import lab as L  # noqa: E402

DNS_PORT, TLS_PORT = 5320, 8854


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


def start(lab, extra=()):
    state = os.path.join(lab.dir, "bench-state")
    lab.start_proxy(["--push-listen", "%s:%d" % (L.PROXY_ADDR, TLS_PORT), "--state-dir", state,
                     "--log-level", "info"] + list(extra), name="bench", port=DNS_PORT, v6=False)
    return os.path.join(state, "push-tls-cert.pem")


def latency(lab, args):
    cert = start(lab)
    stype = "_latency._tcp"
    tname = dns.name.from_text(stype + "." + L.ZONE1)
    inst = dns.name.Name((b"Latency Probe",) + tname.labels)
    c = dso.Client(TLS_PORT, cafile=cert)
    r = c.request(dso.message(1, dso.subscribe_tlv(tname, T.PTR)))
    assert r.rcode == dso.NOERROR
    time.sleep(1.0)
    adds, removes = [], []
    for i in range(args.changes):
        paths = lab.add_far_services("avahi-l1", [("Latency Probe", stype, 7100, [], [b"n=%d" % i])], prefix="lat")
        t0 = time.monotonic()
        _ch, _ = c.push_changes(10, lambda ch: ch[3] <= 0x7FFFFFFF and ch[4] is not None and ch[4].target == inst)
        adds.append(time.monotonic() - t0)
        time.sleep(0.3)
        lab.remove_far_services(paths)
        t0 = time.monotonic()
        c.push_changes(10, lambda ch: ch[3] == dso.REMOVE_ONE and ch[4].target == inst)
        removes.append(time.monotonic() - t0)
        time.sleep(0.3)
    c.close()
    both = adds + removes
    for label, values in (("announce", adds), ("withdraw", removes), ("all", both)):
        print("%-8s n=%d p50=%.3fs p95=%.3fs max=%.3fs" % (
            label, len(values), percentile(values, 50), percentile(values, 95), max(values)))


async def hold_session(index, args, cert, established, stop):
    ctx = ssl.create_default_context(cafile=cert)
    reader, writer = await asyncio.open_connection(L.PROXY_ADDR, TLS_PORT, ssl=ctx, server_hostname="ns.example")
    types = ["_ipp", "_http", "_bulk", "_notxt", "_load%d" % (index % 20)]
    for n in range(args.subscriptions):
        qname = dns.name.from_text("%s._tcp.%s" % (types[n % len(types)], L.ZONE1 if n % 2 == 0 else L.ZONE2))
        wire = dso.message(100 + n, dso.subscribe_tlv(qname, T.PTR))
        writer.write(struct.pack(">H", len(wire)) + wire)
    await writer.drain()
    answered = 0
    while answered < args.subscriptions:
        (length,) = struct.unpack(">H", await reader.readexactly(2))
        reply = dso.Reply(await reader.readexactly(length))
        if reply.qr:
            assert reply.rcode == dso.NOERROR, reply.rcode
            answered += 1
    established.append(index)

    async def drain():
        while True:
            (length,) = struct.unpack(">H", await reader.readexactly(2))
            await reader.readexactly(length)
    drainer = asyncio.ensure_future(drain())
    await stop.wait()
    drainer.cancel()
    writer.close()


def udp_probe(count):
    q = dns.message.make_query("_ipp._tcp." + L.ZONE1, T.PTR)
    dns.query.udp(q, L.PROXY_ADDR, port=DNS_PORT, timeout=2)  # warm the cache
    times = []
    for _ in range(count):
        t0 = time.monotonic()
        dns.query.udp(q, L.PROXY_ADDR, port=DNS_PORT, timeout=2)
        times.append(time.monotonic() - t0)
    return times


async def load_main(args, cert):
    established, stop = [], asyncio.Event()
    t0 = time.monotonic()
    tasks = []
    for i in range(args.sessions):
        tasks.append(asyncio.ensure_future(hold_session(i, args, cert, established, stop)))
        if i % 50 == 49:
            await asyncio.sleep(0.05)  # pace the handshakes a little
    deadline = time.monotonic() + args.setup_timeout
    while len(established) < args.sessions and time.monotonic() < deadline:
        if any(t.done() and t.exception() for t in tasks):
            break
        await asyncio.sleep(0.2)
    setup = time.monotonic() - t0
    failed = [t.exception() for t in tasks if t.done() and t.exception()]
    print("sessions established: %d of %d in %.1fs (%d failed%s)" % (
        len(established), args.sessions, setup, len(failed), (": %r" % failed[0]) if failed else ""))
    loop = asyncio.get_running_loop()
    times = await loop.run_in_executor(None, udp_probe, args.queries)
    print("UDP cache hit while held: n=%d p50=%.2fms p99=%.2fms max=%.2fms" % (
        len(times), 1000 * percentile(times, 50), 1000 * percentile(times, 99), 1000 * max(times)))
    print("proxy RSS with the sessions held: %s" % rss(args.pid))
    await asyncio.sleep(args.hold)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)


def rss(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("VmRSS"))
    except (OSError, StopIteration):
        return "unknown"


def load(lab, args):
    cert = start(lab, ["--push-max-sessions", str(args.sessions + 10)])
    args.pid = lab.procs["bench"].pid  # `ip netns exec` execs the proxy in place
    print("proxy RSS before: %s" % rss(args.pid))
    with L.netns(L.NS_R):
        baseline = udp_probe(args.queries)
        print("UDP cache hit, no sessions: n=%d p50=%.2fms p99=%.2fms max=%.2fms" % (
            len(baseline), 1000 * percentile(baseline, 50), 1000 * percentile(baseline, 99), 1000 * max(baseline)))
        asyncio.run(load_main(args, cert))
    metrics = [line for line in lab.log_text("bench", 50).splitlines() if "error" in line.lower()]
    if metrics:
        print("proxy log errors:", *metrics[-5:], sep="\n  ")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["latency", "load"])
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--subscriptions", type=int, default=5)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--hold", type=float, default=5.0)
    parser.add_argument("--setup-timeout", type=float, default=120.0)
    args = parser.parse_args()
    args.changes = min(args.changes, 200)
    args.sessions = min(args.sessions, 5000)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    lab = L.Lab()
    lab.start(with_proxy=False)
    try:
        (latency if args.mode == "latency" else load)(lab, args)
    finally:
        lab.stop()


if __name__ == "__main__":
    main()
