"""Reference authoritative servers (Knot DNS, NSD) serving what the proxy answers.

Each runs as a child of the lab in the router namespace, single worker, on
127.0.0.1:<port>, with its config, pid file, databases and log in its own temp dir;
the lab's teardown kills it (also on Ctrl-C or an exception)."""

from __future__ import annotations

import os
import socket

import dns.message
import dns.query
import dns.rdatatype

import lab

KNOT_PORT, NSD_PORT = 5310, 5311


def walk_proxy(queries, zone, port=lab.PROXY_PORT):
    """Ask the proxy (over TCP, so nothing is truncated) every (name, type) and the zone
    apex SOA and NS; return the zone file text of every answer RRset, deduplicated."""
    seen, lines = set(), ["$TTL 10"]
    asks = [(zone, "SOA"), (zone, "NS")] + list(queries)
    with lab.netns(lab.NS_R):
        for name, rtype in asks:
            q = dns.message.make_query(name, rtype, use_edns=0, payload=1232)
            r = dns.query.tcp(q, lab.PROXY_ADDR, port=port, timeout=10)
            if not r.answer:
                raise RuntimeError("the proxy has no %s %s answer to copy into the static zone" % (name, rtype))
            for rrset in r.answer:
                key = (rrset.name, rrset.rdtype)
                if key not in seen:
                    seen.add(key)
                    # A young browse's first answers carry the 2 s TTL of a provisional answer
                    # (issue 42); the static zone holds the settled records, at the cap.
                    rrset.ttl = max(rrset.ttl, 10)
                    lines.append(rrset.to_text())
    return "\n".join(lines) + "\n"


def _wait_udp(port, zone, what, lab_):
    def ok():
        lab_.check_alive(what)
        q = dns.message.make_query(zone, dns.rdatatype.SOA)
        with lab.netns(lab.NS_R):
            r = dns.query.udp(q, "127.0.0.1", port=port, timeout=0.5)
        return bool(r.answer)
    lab.wait_for(ok, 20, interval=0.2, what="%s to serve %s on port %d" % (what, zone, port))


def start_knot(lab_, zone, zone_text, port=KNOT_PORT):
    d = os.path.join(lab_.dir, "knot")
    os.makedirs(os.path.join(d, "db"), exist_ok=True)
    zfile = os.path.join(d, "zone.txt")
    with open(zfile, "w") as f:
        f.write(zone_text)
    conf = os.path.join(d, "knot.conf")
    with open(conf, "w") as f:
        f.write("""server:
    rundir: "{d}"
    pidfile: "{d}/knot.pid"
    listen: 127.0.0.1@{port}
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: notice
database:
    storage: "{d}/db"
control:
    listen: "{d}/knot.sock"
zone:
  - domain: {zone}
    file: "{zfile}"
    storage: "{d}"
    zonefile-sync: -1
    journal-content: none
""".format(d=d, port=port, zone=zone, zfile=zfile))
    lab_.spawn(lab.NS_R, ["knotd", "-c", conf], "knotd")
    _wait_udp(port, zone, "knotd", lab_)
    return port


def start_nsd(lab_, zone, zone_text, port=NSD_PORT):
    d = os.path.join(lab_.dir, "nsd")
    os.makedirs(d, exist_ok=True)
    zfile = os.path.join(d, "zone.txt")
    with open(zfile, "w") as f:
        f.write(zone_text)
    conf = os.path.join(d, "nsd.conf")
    with open(conf, "w") as f:
        f.write("""server:
    server-count: 1
    ip-address: 127.0.0.1@{port}
    username: ""
    chroot: ""
    zonesdir: "{d}"
    pidfile: "{d}/nsd.pid"
    database: ""
    xfrdfile: "{d}/xfrd.state"
    zonelistfile: "{d}/zone.list"
    cookie-secret-file: "{d}/cookiesecrets.txt"
    logfile: "{d}/nsd-own.log"
    verbosity: 1
    tcp-count: 1000
    # Debian's NSD has response rate limiting on (200 qps per client netblock): off, as in Knot
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: {zone}
    zonefile: "{zfile}"
""".format(d=d, port=port, zone=zone, zfile=zfile))
    lab_.spawn(lab.NS_R, ["nsd", "-d", "-c", conf], "nsd")
    _wait_udp(port, zone, "nsd", lab_)
    return port


def free_port(port):
    """True if nothing in the router namespace listens on UDP `port` of 127.0.0.1."""
    with lab.netns(lab.NS_R):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False
        finally:
            s.close()
