"""Deployment lab: real recursive resolvers between a client and the proxy (issue 15).

The lab.Lab namespaces stay as they are; this module adds a client namespace and
a parent DNS hierarchy, the way a site deploys the proxy (deploy/parent-zone/)::

    NS_C = dpt-[<id>-]c                              dpt-[<id>-]r
    [lo 127.0.0.1  one resolver at a time  ]       [dpr-c 203.0.113.1/24 2001:db8:3::1/64]
    [lo 127.0.0.2  knotd: ".", "example.", ]--veth--[ proxy instance "proxy-rl" on         ]
    [              "in-addr.arpa."          ]       [ 203.0.113.1:53 and [2001:db8:3::1]:53 ]
    [dpc-r 203.0.113.10/24 2001:db8:3::10/64]       (+ the session proxy on :5300, untouched)

* knotd (authoritative, unsigned) serves a small root zone, `example.` and
  `in-addr.arpa.`.  The root delegates `example.` and `in-addr.arpa.` (to the
  same knotd).  Everything under them comes from `discovery-proxy --config
  proxy-rl.yaml --print-parent-zone` (parent_records()), as a site would make
  it: `example.` delegates lab1/lab2.example. (and link 1's host zone
  lab1-hosts.example.) to ns.example. with its glue (A 203.0.113.1, AAAA
  2001:db8:3::1) and lists the link zones under b/db/lb._dns-sd._udp.example.;
  `in-addr.arpa.` delegates 2.0.192.in-addr.arpa. and 100.51.198.in-addr.arpa.
  to ns.example.  A real delegation has no port, so the proxy must answer on
  port 53.  dnsmasq (a forwarder) gets a server= line per delegated zone.
* The proxy for this lab is a second instance in dpt-r ("proxy-rl", admin port
  8301, loopback port 5301 for lab readiness checks), so the session proxy that
  other test modules use keeps running; restart_proxy() gives a fresh one.
  Its default client ACL admits 203.0.113.0/24 (a subnet of the router's own
  interface dpr-c); the veth exists before the proxy starts.
* One recursive resolver at a time listens on 127.0.0.1:53 in NS_C (RESOLVERS),
  started by the test from config files written to the lab's temp dir, the way
  users start them, and killed by stop_resolver().  Each start is cold (fresh
  working directory, fresh cache).
* tcpdump captures port 53 on every interface of NS_C while a resolver runs
  (client <-> resolver, resolver <-> knotd, resolver <-> proxy);
  packet_log() decodes it for failure messages.
* /etc/netns/NS_C/resolv.conf says `nameserver 127.0.0.1` and `search example.`,
  so programs run with `ip netns exec NS_C` (avahi-daemon's wide-area browsing,
  dnssd-browse, dig) use the running resolver.  test_resolver_clients.py builds
  an avahi-daemon wide-area client and a dnssd-browse check on top of this module.

API::

    rl = ResolverLab(lab)        # lab: a started lab.Lab
    rl.start()                   # NS_C, veth, knotd, resolv.conf, proxy-rl
    rl.restart_proxy()           # fresh proxy-rl (default settings)
    rl.start_resolver("unbound") # stops the previous resolver; waits until it answers
    r = rl.query("lb._dns-sd._udp.example.", "PTR")  # ONE query with RD, from NS_C
    rl.packet_log()              # tcpdump's text of this resolver's port-53 traffic
    rl.stop_resolver(); rl.stop()

The pieces (parent_records, start_knot, resolver_command, wait_resolver) also
serve campus_ha_lab.py, whose parent zone joins two routers' printed records.

Nothing runs on the host: every daemon runs in NS_C or dpt-r and is stopped by
stop(); namespaces are named from lab.NS_PREFIX (DPT_LAB_ID keeps labs apart).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

import lab as L

NS_C = L.NS_PREFIX + "c"
R_IF_C, C_IF = "dpr-c", "dpc-r"          # router side / client side of the client link
R_V4_C, R_V6_C = "203.0.113.1", "2001:db8:3::1"
C_V4, C_V6 = "203.0.113.10", "2001:db8:3::10"
KNOT_ADDR = "127.0.0.2"                  # the parent side (root, example., in-addr.arpa.)
RESOLVER_ADDR = "127.0.0.1"              # the resolver the client uses
ROOT_NS = "a.root-servers.lab."          # our root server's name (data in the root zone)
PROXY_NAME = "proxy-rl"
PROXY_LOOP_PORT = 5301                   # proxy-rl also on 127.0.0.1:5301 (readiness check)

RESOLVERS = ("unbound", "bind", "kresd", "pdns", "dnsmasq")
# each resolver's executable, to tell whether it is installed
BINARIES = {"unbound": "unbound", "bind": "named", "kresd": "kresd",
            "pdns": "pdns_recursor", "dnsmasq": "dnsmasq"}


def installed(kind):
    return shutil.which(BINARIES[kind]) is not None


def proxy_exchanges(packets, qname=None, since=0.0):
    """The resolver's queries to the proxy in `packets` (ResolverLab.packets) since `since`
    (wall clock), only those for `qname` (any case) when given, each with the proxy's answer:
    [dict(qname, type, t, src, sport, id, answered_after, rcode, answers)], in order; t is
    relative to `since`, answered_after None while unanswered, rcode "NODATA" for NOERROR
    without answer records, answers the number of answer records."""
    want = None if qname is None else qname.lower().rstrip(".") + "."
    sent, out = {}, []
    for ts, src, sport, dst, dport, msg in packets:
        if ts < since or not msg.question:
            continue
        q = msg.question[0]
        name = q.name.to_text().lower()
        if want is not None and name != want:
            continue
        if src in (C_V4, C_V6) and dst in (R_V4_C, R_V6_C) and dport == 53 and not msg.flags & dns.flags.QR:
            rec = dict(qname=name, type=dns.rdatatype.to_text(q.rdtype), t=ts - since, src=src,
                       sport=sport, id=msg.id, answered_after=None, rcode=None, answers=0)
            sent[(src, sport, msg.id)] = rec
            out.append(rec)
        elif src in (R_V4_C, R_V6_C) and sport == 53 and msg.flags & dns.flags.QR:
            rec = sent.get((dst, dport, msg.id))
            if rec is not None and rec["answered_after"] is None:
                rec["answered_after"] = ts - since - rec["t"]
                rc = msg.rcode()
                rec["rcode"] = ("NODATA" if rc == dns.rcode.NOERROR and not msg.answer
                                else dns.rcode.to_text(rc))
                rec["answers"] = sum(len(rrset) for rrset in msg.answer)
    return out

# --------------------------------------------------------------------------
# Zones (unsigned) served by knotd
# --------------------------------------------------------------------------

SOA_TAIL = "1 3600 600 86400 60"  # serial refresh retry expire negative-TTL

ROOT_ZONE = """\
$TTL 3600
.                       SOA   {ns} hostmaster.example. {soa}
.                       NS    {ns}
{ns}     A     {knot}
; delegations to the same knotd (out of bailiwick: the resolver looks up {ns})
example.                NS    {ns}
in-addr.arpa.           NS    {ns}
"""

# The parent zones' own apex; the delegations under them (link zones, glue, b/db/lb PTRs,
# reverse zones) come from `discovery-proxy --print-parent-zone` (parent_records()).
EXAMPLE_ZONE = """\
$ORIGIN example.
$TTL 3600
@                       SOA   {ns} hostmaster.example. {soa}
@                       NS    {ns}
"""

IN_ADDR_ARPA_ZONE = """\
$ORIGIN in-addr.arpa.
$TTL 3600
@                       SOA   {ns} hostmaster.example. {soa}
@                       NS    {ns}
"""

# The zones knotd serves, each with its apex text; printed blocks go into the one that
# encloses them.
KNOT_ZONES = {".": ("root.zone", ROOT_ZONE), "example.": ("example.zone", EXAMPLE_ZONE),
              "in-addr.arpa.": ("in-addr.arpa.zone", IN_ADDR_ARPA_ZONE)}


def parent_records(*printed):
    """{knot zone: [record lines]} from the text of one or more proxies'
    `--print-parent-zone` (concatenated, as a site with several routers would), each line
    once. A block "; ---- in zone P" goes into the lab zone enclosing P (0.192.in-addr.arpa.
    into in-addr.arpa.). ip6.arpa. blocks are left out: the lab's root does not delegate
    ip6.arpa. (a real root delegates it elsewhere), and no test browses by IPv6 address."""
    out = {z: [] for z in KNOT_ZONES}
    for text in printed:
        target = None
        for line in text.splitlines():
            if line.startswith("; ---- in zone "):
                parent = line.split()[4].lower()
                target = None if parent.endswith("ip6.arpa.") else max(
                    (z for z in KNOT_ZONES if z == "." or parent == z or parent.endswith("." + z)), key=len)
            elif target and line.strip() and not line.startswith(";"):
                rec = line.split(";")[0].strip()
                if rec not in out[target]:
                    out[target].append(rec)
    return out


def delegations(records):
    """{zone: [addresses of its name servers]} from parent_records(): the forwarding that a
    forwarder (dnsmasq) needs instead of following the delegations; IPv4 glue only, as the
    lab's forwarding has always been."""
    ns, glue = {}, {}
    for lines in records.values():
        for line in lines:
            owner, _ttl, _cls, rtype, data = line.split(None, 4)
            if rtype == "NS":
                ns.setdefault(owner.lower(), []).append(data.lower())
            elif rtype in ("A", "AAAA"):
                glue.setdefault(owner.lower(), []).append(data)
    return {zone: [a for s in servers for a in glue.get(s, []) if ":" not in a]
            for zone, servers in ns.items()}


def reverse_zones(records):
    """The reverse zones delegated in `records` (RFC 6303 empty zones the resolvers must not
    answer locally)."""
    return [z for z in delegations(records) if z.endswith(".in-addr.arpa.")]


ROOT_HINTS = """\
.                       3600000  NS  {ns}
{ns}     3600000  A   {knot}
"""

KNOT_CONF = """\
server:
    listen: [ {listen} ]
    rundir: {d}
control:
    listen: {d}/knot.sock
database:
    storage: {d}
log:
  - target: stderr
    any: info
template:
  - id: default
    storage: {d}
    # read-only zone files, no journal: nothing is written back
    zonefile-sync: -1
    zonefile-load: whole
    journal-content: none
zone:
{zones}"""


def knot_conf(d, listen, zones):
    """A knotd configuration in `d`: `listen` addresses (port 53), `zones` {domain: file}."""
    return KNOT_CONF.format(d=d, listen=", ".join("%s@53" % a for a in listen),
                            zones="".join("  - domain: %s\n    file: %s\n" % z for z in zones.items()))


# --------------------------------------------------------------------------
# Resolver configurations: defaults, except what the lab needs (said why)
# --------------------------------------------------------------------------

UNBOUND_CONF = """\
server:
    # where the lab's client asks
    interface: {addr}
    port: 53
    # files live in the test's temp dir: no chroot, no privilege drop, no pid file
    chroot: ""
    username: ""
    directory: "{d}"
    pidfile: ""
    use-syslog: no
    logfile: ""
    verbosity: 1
    # our root is knotd on 127.0.0.2 (no trust anchor: our root is unsigned)
    root-hints: "{d}/root.hints"
    # knotd listens on loopback, which Unbound never queries by default
    do-not-query-localhost: no
    # RFC 6303 built-in empty zones would answer the links' reverse zones locally
{unbound_rev}
    # qname-minimisation stays on (the default)
"""

BIND_CONF = """\
options {{
    // working files in the test's temp dir; no pid file, no session key in /run
    directory "{d}";
    pid-file none;
    session-keyfile none;
    // where the lab's client asks (BIND binds only addresses configured on an interface)
    listen-on port 53 {{ {addr}; }};
    listen-on-v6 {{ none; }};
    // our root is unsigned; the default (auto) validates with the real root key
    dnssec-validation no;
    // RFC 6303 built-in empty zones would answer the links' reverse zones locally
{bind_rev}
}};
// no rndc control channel (it would read /etc/bind/rndc.key)
controls {{ }};
// our root is knotd on 127.0.0.2
zone "." {{ type hint; file "{d}/root.hints"; }};
"""

KRESD_CONF = """\
-- where the lab's client asks
net.listen('{addr}', 53, {{ kind = 'dns' }})
-- a fresh cache in this run's directory: every start is cold
cache.open(10 * MB, 'lmdb://{d}/cache')
-- our root is unsigned: no root trust anchor
trust_anchors.remove('.')
-- our root is knotd on 127.0.0.2 (Knot Resolver 5 has no stub zone that sends
-- iterative queries: policy.STUB recurses, so the lab gives it a root); the hints
-- module that sets root hints is not loaded by default
modules.load('hints > iterate')
hints.root({{ ['{ns}'] = '{knot}' }})
-- RFC 6303 names are refused by default (policy.special_names): let the links'
-- reverse zones through
policy.add(policy.suffix(policy.PASS, policy.todnames({{ {rev} }})))
"""

PDNS_CONF = """\
# where the lab's client asks
local-address={addr}
local-port=53
daemon=no
write-pid=no
socket-dir={d}
disable-syslog=yes
# our root is knotd on 127.0.0.2
hint-file={d}/root.hints
# the default list forbids 127/8 and the documentation prefixes the lab uses
dont-query=
# our root is unsigned; the default (process) validates with the built-in root key
dnssec=off
"""

DNSMASQ_CONF = """\
# where the lab's client asks
port=53
listen-address={addr}
bind-interfaces
# /etc/resolv.conf in NS_C points back at 127.0.0.1: no default upstream
no-resolv
# stays in the foreground (-k); no pid file in /run; log to stderr
pid-file=
log-facility=-
log-queries
# forwarding: the parent zones to knotd, each delegated zone (link zones and their
# reverse zones) to its proxies (deploy/parent-zone/dnsmasq.conf, proxy on another host)
server=/example/{knot}
server=/in-addr.arpa/{knot}
{servers}
"""


def write_file(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def fmt(text, d, records=None, addr=RESOLVER_ADDR, knot=KNOT_ADDR):
    """A template of this module filled in: `d` the directory, `records` the parent zones'
    records (parent_records()), from which the reverse zones and dnsmasq's forwarding come."""
    records = records or {}
    rev = reverse_zones(records)
    servers = "\n".join("server=/%s/%s" % (z.rstrip("."), a)
                        for z, addrs in delegations(records).items() for a in addrs)
    return text.format(d=d, ns=ROOT_NS, knot=knot, soa=SOA_TAIL, addr=addr,
                       rev=", ".join("'%s'" % z for z in rev), servers=servers,
                       unbound_rev="\n".join('    local-zone: "%s" nodefault' % z for z in rev),
                       bind_rev="\n".join('    disable-empty-zone "%s";' % z.rstrip(".").upper() for z in rev))


def start_knot(proclab, ns, d, records, name="knotd", timeout=15):
    """knotd in `ns` on KNOT_ADDR serving KNOT_ZONES, each apex plus its `records`
    (parent_records()); started as proclab's process `name` (a lab.Lab); waits for the SOAs."""
    for zone, (fname, text) in KNOT_ZONES.items():
        write_file(os.path.join(d, fname), fmt(text, d) + "".join(l + "\n" for l in records.get(zone, ())))
    write_file(os.path.join(d, "knot.conf"),
               knot_conf(d, [KNOT_ADDR], {zone: fname for zone, (fname, _text) in KNOT_ZONES.items()}))
    proclab.spawn(ns, ["knotd", "-c", os.path.join(d, "knot.conf")], name)

    def answers():
        proclab.check_alive(name)
        for zone in KNOT_ZONES:
            q = dns.message.make_query(zone, dns.rdatatype.SOA)
            with L.netns(ns):
                r = dns.query.udp(q, KNOT_ADDR, timeout=1)
            if r.rcode() != dns.rcode.NOERROR or not r.answer:
                return False
        return True
    L.wait_for(answers, timeout, what="knotd to serve the parent zones")


def resolver_command(kind, d, records):
    """Write `kind`'s configuration (and root hints) into directory `d`, for a resolver on
    RESOLVER_ADDR:53 whose root is knotd and whose parent zones hold `records`; return the
    command that runs it in the foreground."""
    if kind not in RESOLVERS:
        raise ValueError("unknown resolver %r (one of %s)" % (kind, ", ".join(RESOLVERS)))
    write_file(os.path.join(d, "root.hints"), fmt(ROOT_HINTS, d))
    conf, template, cmd = {
        "unbound": ("unbound.conf", UNBOUND_CONF, ["unbound", "-d", "-c", "{conf}"]),
        "bind": ("named.conf", BIND_CONF, ["named", "-g", "-c", "{conf}"]),
        "kresd": ("kresd.conf", KRESD_CONF, ["kresd", "-n", "-c", "{conf}", d]),
        "pdns": ("recursor.conf", PDNS_CONF, ["pdns_recursor", "--config-dir=" + d]),
        "dnsmasq": ("dnsmasq.conf", DNSMASQ_CONF, ["dnsmasq", "-k", "-C", "{conf}"]),
    }[kind]
    path = os.path.join(d, conf)
    write_file(path, fmt(template, d, records))
    return [c.replace("{conf}", path) for c in cmd]


def wait_resolver(proclab, name, query, timeout=30):
    """Wait until the resolver process `name` answers `example. SOA` through `query`
    (name, type, timeout -> response); a resolver that exits (bad config) fails at once."""
    deadline = time.monotonic() + timeout
    while True:
        proclab.check_alive(name)
        with contextlib.suppress(Exception):
            r = query("example.", dns.rdatatype.SOA, timeout=1)
            if r.rcode() == dns.rcode.NOERROR and r.answer:
                return
        if time.monotonic() > deadline:
            raise TimeoutError("%s did not answer example. SOA within %ss; log:\n%s"
                               % (name, timeout, proclab.log_text(name, 60)))
        time.sleep(0.3)


class ResolverLab:
    """Client namespace, parent zones on knotd, a proxy on port 53 and one recursive
    resolver at a time, on top of a started lab.Lab (see the module docstring)."""

    def __init__(self, lab):
        self.lab = lab
        # one directory per instance: each test module that uses the lab makes its own
        self.dir = tempfile.mkdtemp(prefix="resolver-lab-", dir=lab.dir)
        self.kind = None          # the running resolver
        self.run_dir = None       # its working directory
        self.pcap = None          # its capture
        self._runs = 0
        self.records = {}         # the parent zones' delegations (parent_records())
        self._etc_dir = "/etc/netns/%s" % NS_C
        self.up = False

    # ---- lab --------------------------------------------------------------
    def start(self):
        _cleanup_client_ns()
        os.makedirs(self.dir, exist_ok=True)
        atexit.register(self.stop)
        try:
            self._resolv_conf()
            self._netns()
            self._knot()
            self.restart_proxy()
            self.up = True
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        self.stop_resolver()
        self.lab.stop_proc("knotd")
        self.stop_proxy()
        _cleanup_client_ns()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self._etc_dir, "resolv.conf"))
        with contextlib.suppress(OSError):
            os.rmdir(self._etc_dir)
        self.up = False

    def _resolv_conf(self):
        # `ip netns exec NS_C` bind-mounts this over /etc/resolv.conf
        os.makedirs(self._etc_dir, exist_ok=True)
        with open(os.path.join(self._etc_dir, "resolv.conf"), "w") as f:
            f.write("nameserver %s\nsearch example.\n" % RESOLVER_ADDR)

    def _netns(self):
        L.run(["ip", "netns", "add", NS_C])
        L.nsrun(NS_C, ["ip", "link", "set", "lo", "up"])
        L.run(["ip", "link", "add", R_IF_C, "netns", L.NS_R, "type", "veth",
               "peer", "name", C_IF, "netns", NS_C])
        for ns, ifn, v4, v6 in ((L.NS_R, R_IF_C, R_V4_C, R_V6_C), (NS_C, C_IF, C_V4, C_V6)):
            L.nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.%s.accept_dad=0" % ifn])
            L.nsrun(ns, ["ip", "addr", "add", v4 + "/24", "dev", ifn])
            L.nsrun(ns, ["ip", "-6", "addr", "add", v6 + "/64", "dev", ifn, "nodad"])
            L.nsrun(ns, ["ip", "link", "set", ifn, "up"])

        def ready():
            out = L.nsrun(NS_C, ["ip", "-6", "addr", "show", "dev", C_IF]).stdout
            return C_V6 in out and "tentative" not in out
        L.wait_for(ready, 10, what="the client link's IPv6 address")

    def parent_zone_config(self):
        """The YAML equivalent of proxy-rl's command line (lab.Lab.start_proxy with the
        arguments of restart_proxy), plus link 1's host zone that test_resolver_host_zone.py
        gives it: the configuration the parent zone is printed for. (Until that test restarts
        proxy-rl with the host zone, lab1-hosts.example.'s delegation is lame.)"""
        path = os.path.join(self.dir, "proxy-rl.yaml")
        write_file(path, "server-name: %s\nlisten: [\"%s:53\", \"[%s]:53\", \"127.0.0.1:%d\"]\n"
                   "links:\n  - {interface: %s, domain: %s, host-zone: lab1-hosts.example.}\n"
                   "  - {interface: %s, domain: %s}\n"
                   % (L.SERVER_NAME, R_V4_C, R_V6_C, PROXY_LOOP_PORT, L.R_IF1, L.ZONE1, L.R_IF2, L.ZONE2))
        return path

    def _knot(self):
        # The delegations come from the proxy itself, as docs/DEPLOYMENT.md tells sites to do
        # (run in dpt-r: the link subnets, hence the reverse zones, are read from its interfaces).
        printed = L.nsrun(L.NS_R, [L.Lab.proxy_bin(), "--config", self.parent_zone_config(),
                                   "--print-parent-zone"]).stdout
        self.records = parent_records(printed)
        start_knot(self.lab, NS_C, os.path.join(self.dir, "knot"), self.records)

    # ---- proxy --------------------------------------------------------------
    def restart_proxy(self, extra_args=(), binary=None, log_level="debug", links=True):
        """(Re)start proxy-rl in dpt-r (its defaults unless `extra_args` say otherwise),
        serving port 53 on the client link (and 127.0.0.1:5301 for the readiness check).
        `binary` and `log_level` as for lab.Lab.start_proxy (the benchmark passes them);
        `links=False` when a --config file in `extra_args` names the links."""
        self.stop_proxy()
        self.lab.start_proxy(name=PROXY_NAME, port=PROXY_LOOP_PORT, v6=False, binary=binary,
                             log_level=log_level, links=links,
                             extra_args=["--listen", "%s:53" % R_V4_C, "--listen", "[%s]:53" % R_V6_C]
                             + list(extra_args))

    def stop_proxy(self):
        self.lab.stop_proc(PROXY_NAME)

    # ---- resolvers ----------------------------------------------------------
    def start_resolver(self, kind, timeout=30):
        """Stop the running resolver, start `kind` cold (new directory, new cache) on
        127.0.0.1:53 in NS_C, and wait until it answers `example. SOA`."""
        self.stop_resolver()
        self._runs += 1
        d = os.path.join(self.dir, "%s-%d" % (kind, self._runs))
        os.makedirs(d)
        cmd = resolver_command(kind, d, self.records)
        self._start_capture(d)
        self.kind, self.run_dir = kind, d
        self.lab.spawn(NS_C, cmd, "resolver-" + kind)
        wait_resolver(self.lab, "resolver-" + kind, self.query, timeout)

    def stop_resolver(self):
        if self.kind is not None:
            self.lab.stop_proc("resolver-" + self.kind)
        self.lab.stop_proc("tcpdump-c")
        self.kind = None

    def resolver_log(self, tail=60):
        return self.lab.log_text("resolver-" + self.kind, tail) if self.kind else ""

    def proxy_log(self, tail=60):
        return self.lab.log_text(PROXY_NAME, tail)

    # ---- client side --------------------------------------------------------
    def query(self, name, rdtype, timeout=4.0, tcp=False):
        """Send ONE query (RD, EDNS0 1232) from NS_C to the resolver; return the response.
        Raises dns.exception.Timeout when nothing comes back within `timeout`."""
        if isinstance(rdtype, str):
            rdtype = dns.rdatatype.from_text(rdtype)
        q = dns.message.make_query(name, rdtype, use_edns=0, payload=1232)
        with L.netns(NS_C):
            if tcp:
                return dns.query.tcp(q, RESOLVER_ADDR, port=53, timeout=timeout)
            return dns.query.udp(q, RESOLVER_ADDR, port=53, timeout=timeout)

    # ---- packet capture -----------------------------------------------------
    def _start_capture(self, d):
        self.lab.stop_proc("tcpdump-c")
        self.pcap = os.path.join(d, "dns.pcap")
        # Small frames and a 16 MiB ring: with `-s 0` and the default 2 MiB, `-i any` dropped
        # packets ("dropped by kernel") whenever tcpdump was not scheduled for a moment.
        self.lab.spawn(NS_C, ["tcpdump", "-i", "any", "-n", "-U", "--immediate-mode", "-s", "2048",
                              "-B", "16384", "-w", self.pcap, "port", "53"], "tcpdump-c",
                       stdout=subprocess.DEVNULL)
        L.wait_for(lambda: os.path.exists(self.pcap) and os.path.getsize(self.pcap) >= 24,
                   10, what="tcpdump in %s to open its capture file" % NS_C)

    def packets(self, since=0.0):
        """The running resolver's UDP DNS packets since `since` (wall clock), parsed:
        [(ts, src, sport, dst, dport, dns.message.Message)] (lab.dns_packets)."""
        time.sleep(0.1)  # -U writes per packet; let the last ones land
        return [p for p in L.dns_packets(self.pcap) if p[0] >= since]

    def packet_log(self, grep=None, max_lines=400):
        """tcpdump's decoding of the running resolver's port-53 traffic so far (client <->
        resolver on lo, resolver <-> knotd on lo, resolver <-> proxy on dpc-r); with `grep`,
        only lines containing that text (case-insensitive)."""
        if not self.pcap or not os.path.exists(self.pcap):
            return "(no capture)"
        cmd = ["tcpdump", "-n", "-K", "-r", self.pcap, "-tttt", "-vv"]
        # read inside NS_C: the capture names interfaces by index
        r = L.nsrun(NS_C, cmd, check=False) if NS_C in L.list_netns() else L.run(cmd, check=False)
        packets = []  # -vv continues an IPv4 packet on an indented line: one line per packet
        for ln in r.stdout.splitlines():
            if ln[:1].isspace() and packets:
                packets[-1] += " " + ln.strip()
            else:
                packets.append(ln)
        lines = [p for p in packets if not grep or grep.lower() in p.lower()]
        if len(lines) > max_lines:
            lines = ["... %d lines left out" % (len(lines) - max_lines)] + lines[-max_lines:]
        return "\n".join(lines)


def _cleanup_client_ns():
    """Kill what runs in NS_C (by PID) and delete it; other labs' namespaces stay."""
    if NS_C in L.list_netns():
        _delete_client_ns()
    # The kernel tears a namespace down in the background: the veth pair (its router end
    # dpr-c) can outlive `ip netns del` for a moment, and the next start's `ip link add`
    # then fails with "File exists". Wait for it, and remove it if it stays.
    deadline = time.monotonic() + 5
    while _router_end_exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    if _router_end_exists():
        L.run(["ip", "-n", L.NS_R, "link", "del", R_IF_C], check=False)


def _delete_client_ns():
    pids = L.run(["ip", "netns", "pids", NS_C], check=False).stdout.split()
    for p in pids:
        L.kill_pid(int(p), signal.SIGTERM)
    deadline = time.monotonic() + 3
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if os.path.exists("/proc/%s" % p)]
        time.sleep(0.1)
    for p in pids:
        L.kill_pid(int(p), signal.SIGKILL)
    L.run(["ip", "netns", "del", NS_C], check=False)


def _router_end_exists():
    if L.NS_R not in L.list_netns():
        return False
    return L.run(["ip", "-n", L.NS_R, "link", "show", R_IF_C], check=False).returncode == 0
