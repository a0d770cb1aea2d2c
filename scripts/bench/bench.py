"""Discovery-proxy benchmark (issue 4): cache-hit throughput next to Knot DNS and NSD,
cold-miss latency next to avahi-browse, hit latency at half load, memory per instance,
scaling, optimistic answers, answers through real recursive resolvers (issue 15), many links
on one proxy (issue 16), the SRP registrar (issue 44). Runs in the integration suite's
namespace lab (and the campus, gateway and SRP labs).

Usage (root): scripts/bench.sh [--smoke] [--json OUT] [--proxy-bin PATH] [--profile DIR] [--only ROWS] [--deb PATH]
              [--links N] [--srp-hosts N] [--srp-growth-seconds S]"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "Tests", "integration"))
sys.path.insert(0, HERE)

import lab  # noqa: E402
import footprint  # noqa: E402
import gateway as gatewayrow  # noqa: E402
import links as linksrow  # noqa: E402
import perfprofile  # noqa: E402
import phases  # noqa: E402
import probes  # noqa: E402
import resolvers  # noqa: E402
import slowlinks  # noqa: E402
import srp as srprow  # noqa: E402
import benchsite as sitemod  # noqa: E402
from proxies import MAIN_PORT, Proxy  # noqa: E402
from report import Report  # noqa: E402


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench.sh", description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes and 1 s runs (CI): same code path, numbers meaningless")
    ap.add_argument("--json", metavar="OUT", help="also write the table and raw data as JSON")
    ap.add_argument("--proxy-bin", metavar="PATH", default=os.path.join(REPO, ".build", "release", "discovery-proxy"),
                    help="discovery-proxy binary to measure (default .build/release/discovery-proxy)")
    ap.add_argument("--profile", metavar="DIR",
                    help="also record the proxy with perf (cpu-clock, DWARF call graphs) under the UDP "
                         "cache-hit load; writes DIR/perf.data, DIR/perf-self.txt, DIR/perf-inclusive.txt")
    ap.add_argument("--only", metavar="ROWS", type=_rows,
                    help="run only these rows, comma-separated, of: %s (warming and the reference "
                         "servers come along where a row needs them; latency needs throughput)" % ", ".join(ROWS))
    ap.add_argument("--deb", metavar="PATH",
                    help="the Debian package to weigh in the footprint row (e.g. ../discovery-proxy_*.deb)")
    ap.add_argument("--links", metavar="N", type=int,
                    help="links for the links row (default 200, 5 with --smoke; at most %d)" % linksrow.C.MAX_LINKS)
    ap.add_argument("--srp-hosts", metavar="N", type=int,
                    help="hosts the srp row registers at most (default 10000, 60 with --smoke)")
    ap.add_argument("--srp-growth-seconds", metavar="S", type=int,
                    help="time the srp row spends adding hosts beyond the first 1000 (default 240, 20 with --smoke)")
    return ap.parse_args(argv)


ROWS = ("cold", "throughput", "latency", "scaling", "tcp-held", "optimistic", "memory", "footprint", "resolvers",
        "slow-links", "links", "gateway", "srp")


def _rows(text):
    rows = [r.strip() for r in text.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown or not rows:
        raise argparse.ArgumentTypeError("unknown row %r; rows are %s" % (
            (unknown or [text])[0], ", ".join(ROWS)))
    if "latency" in rows and "throughput" not in rows:
        rows.append("throughput")  # the half load is half the measured UDP peak
    if "tcp-held" in rows and "throughput" not in rows:
        rows.append("throughput")
    return set(rows)


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, 65536) if hard != resource.RLIM_INFINITY else 65536
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))  # children inherit it


def main(argv):
    args = parse_args(argv)
    binary = os.path.abspath(args.proxy_bin)
    if os.geteuid() != 0:
        print("bench: must run as root (network namespaces)", file=sys.stderr)
        return 2
    if not os.access(binary, os.X_OK):
        print("bench: proxy binary %s not found or not executable (build it: swift build -c release)"
              % binary, file=sys.stderr)
        return 2
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        print("bench: --json %s: no such directory" % args.json, file=sys.stderr)
        return 2
    # Ctrl-C must reach the teardown even when started from a shell that ignores SIGINT for
    # background jobs; SIGTERM is handled by Lab.start (exit 143 through the same finally).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    raise_fd_limit()
    sizes = sitemod.Sizes.smoke() if args.smoke else sitemod.Sizes.full()
    site = sitemod.build(sizes)
    started = time.monotonic()

    def log(msg):
        print("[%6.1fs] %s" % (time.monotonic() - started, msg), flush=True)

    report = Report(dict(
        date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        mode="smoke" if args.smoke else "full", proxy_bin=binary, host=platform.node(),
        cpus=os.cpu_count(), load_at_start=os.getloadavg(), lab_id=lab.LAB_ID or "(default)",
        sizes=sizes.__dict__, published_instances=len(site.services)))
    lab_ = lab.Lab(**sitemod.lab_options())
    run = phases.Run(lab_, site, report, binary, log)
    want = args.only or set(ROWS)
    main_rows = want & {"cold", "throughput", "latency", "scaling", "tcp-held"}
    try:
        if want - {"links", "gateway", "srp"}:
            log("lab: starting namespaces, dbus, avahi-daemons")
            lab_.start(with_proxy=False)
            log("lab: publishing %d bench instances on link 2" % len(site.services))
            sitemod.start_responder(lab_, site)
        if main_rows:
            run.main = Proxy(lab_, binary, MAIN_PORT, "proxy").start()
            report.meta["main_proxy_idle_rss_kib"] = probes.rss_kib(run.main.pid)
        if "cold" in want:
            log("b. cold-miss latency")
            phases.cold_miss(run)
        # Before warming and scaling: afterwards the lab's mDNS is busy for minutes (see below).
        # Its proxy listens on 127.0.0.1:5301 (the optimistic row's port): not at the same time.
        if "resolvers" in want:
            log("g. answers through recursive resolvers")
            resolvers.run(run)
        if main_rows - {"cold"}:
            log("warming the site (%d instances)" % (sizes.site_types * sizes.site_instances))
            queries = phases.warm_site(run)
        if "throughput" in want:
            log("static zone from the proxy's answers; starting knotd and nsd")
            phases.start_references(run, queries)
            log("a. cache-hit throughput (UDP, TCP)")
            phases.throughput(run)
            log("a. cache-hit throughput with replay off")
            phases.no_replay(run)
        if "latency" in want:
            log("c. cache-hit latency at 50% of peak")
            phases.latency_at_half_load(run)
        if args.profile and "throughput" in want:
            log("profile: perf record (DWARF call graphs) of the proxy under UDP cache-hit load")
            perfprofile.record(run, os.path.abspath(args.profile))
        # Held connections before scaling: after it, the lab's mDNS is busy for minutes with the
        # thousand instances just learned (avahi-daemon refreshing them, the responder
        # answering), and that load, not the connections, set the held row's p99.
        if "tcp-held" in want:
            log("e. %d TCP connections held" % sizes.tcp_held)
            phases.held_tcp(run)
        if "scaling" in want:
            log("e. scaling")
            phases.scaling(run)
        lab_.stop_proc("knotd")
        lab_.stop_proc("nsd")
        if "optimistic" in want:
            log("f. optimistic answers")
            phases.optimistic(run)
        if run.main:
            run.main.stop()
        if "memory" in want:
            log("d. memory")
            phases.memory(run)
        if "footprint" in want:
            log("j. footprint: binary, package, idle memory beside knotd and avahi-daemon")
            footprint.run(run, deb=args.deb)
        if "slow-links" in want:
            log("k. slow links: cold browses on a conditioned link 1")
            slowlinks.run(run, smoke=args.smoke)
        lab_.stop()   # the links row has a lab of its own (campus_lab.py): a quiet machine for it
        if "links" in want:
            linksrow.run(report, binary, log, smoke=args.smoke, links=args.links)
        if "gateway" in want:
            log("i. mDNS gateway against avahi's reflector")
            gatewayrow.run(report, binary, log, smoke=args.smoke)
        if "srp" in want:
            srprow.run(report, binary, log, smoke=args.smoke, hosts=args.srp_hosts,
                       growth_seconds=args.srp_growth_seconds)
        report.meta["seconds"] = round(time.monotonic() - started, 1)
        report.meta["load_at_end"] = os.getloadavg()
    except BaseException:
        names = [n for n in lab_.logs if n.startswith(("proxy", "resolver-")) or n in ("knotd", "nsd")]
        lab_.dump_logs(names, tail=30)
        raise
    finally:
        lab_.stop()
    print()
    print("discovery-proxy benchmark (%s, %s)" % (report.meta["mode"], report.meta["date"]))
    print(report.table())
    if args.json:
        report.write_json(args.json)
        print("JSON: %s" % args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
