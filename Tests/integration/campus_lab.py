"""Campus lab: N links on one router, one avahi-daemon, one proxy (issue 16, "Many links").

Layout (documentation ranges only, RFC 5737 / RFC 3849 / RFC 3021)::

    <NS_PREFIX>cr  router: private dbus-daemon, avahi-daemon (querier only), the proxies
       cr1 .. crN      one veth per link (no 802.1Q here: this kernel has no
        |   |   |      CONFIG_VLAN_8021Q, so each VLAN of a trunk is a veth pair)
       cf1 .. cfN
    <NS_PREFIX>cf  far side: one mDNS responder process, two sockets per link

Link i (1-based) gets an IPv4 /31 (RFC 3021: two addresses, no network or broadcast
address) cut from 192.0.2.0/24, then 198.51.100.0/24, then 203.0.113.0/24: 128 links per
/24, 384 at most. The router end is the even address, the far end the odd one. IPv6 is
2001:db8:c:<i in hex>::/64 (router ::1, far ::10). Link i is the zone link<i>.campus.example.

Each link's far end publishes only its own instances, so isolation (RFC 8766 §5.1: each
zone shows one link's services) is checkable: "Printer <i>" of _ipp._tcp on host far<i>
(A and AAAA of that link), and, for cold-browse measurements, any type _c<NN>._tcp asked
of it has one instance "Cold <NN> on <i>". One avahi-daemon in the far namespace would
publish every service on every link, so the responder is a small raw one (run as
`campus_lab.py respond N`): an IPv4 and an IPv6 socket per link, each bound to its
interface with one multicast membership, so the far side never meets
net.ipv4.igmp_max_memberships (a per-socket limit, default 20).

The router's avahi-daemon has no allow-interfaces line: avahi 0.8 reads its configuration
with a 256-byte line buffer, so a list longer than ~240 characters splits and the daemon
refuses to start ("Missing assignment"); the router namespace holds only the links anyway.
`igmp_max_memberships` (a per-namespace sysctl) is left at the kernel's value unless given:
avahi joins 224.0.0.251 on every interface through one socket, so with the default 20 the
links after the 20th get no IPv4 mDNS (see test_campus_links.py for what happens).

Manual use: `python3 campus_lab.py up N` (Enter tears down), `python3 campus_lab.py down`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab as L  # noqa: E402

NS_CR, NS_CF = L.NS_PREFIX + "cr", L.NS_PREFIX + "cf"
MAX_LINKS = 384                        # three /24s of /31s
PARENT = "campus.example."
SERVER_NAME = "ns.campus.example."
PROXY_ADDR = "127.0.0.1"
MDNS_V4, MDNS_V6, MDNS_PORT = "224.0.0.251", "ff02::fb", 5353
BLOCKS = ("192.0.2", "198.51.100", "203.0.113")
TTL = 120


class Link:
    """Link i: its interfaces, addresses, zone and the one instance its far end publishes."""

    def __init__(self, i):
        if not 1 <= i <= MAX_LINKS:
            raise ValueError("link %d outside 1..%d" % (i, MAX_LINKS))
        k = i - 1
        base, off = BLOCKS[k // 128], (k % 128) * 2
        self.i = i
        self.router_if, self.far_if = "cr%d" % i, "cf%d" % i
        self.router_v4, self.far_v4 = "%s.%d" % (base, off), "%s.%d" % (base, off + 1)
        self.router_v6, self.far_v6 = "2001:db8:c:%x::1" % i, "2001:db8:c:%x::10" % i
        self.zone = "link%d.%s" % (i, PARENT)
        self.instance = "Printer %d" % i
        self.host = "far%d" % i
        self.txt = [b"link=%d" % i, b"rp=printers/%d" % i]

    def cold_instance(self, stype):
        """The instance the far end invents for a cold-browse type _c<NN>._tcp."""
        return "Cold %s on %d" % (stype.split(".")[0][2:], self.i)


def cold_type(n):
    """A service type only asked once (a cold browse): _c<n>._tcp, answered on every link."""
    return "_c%d._tcp" % n


def cleanup_stale():
    """Delete this campus lab's leftover namespaces, killing what runs in them."""
    for ns in (NS_CR, NS_CF):
        if ns not in L.list_netns():
            continue
        for p in L.run(["ip", "netns", "pids", ns], check=False).stdout.split():
            L.kill_pid(int(p), signal.SIGKILL)
        L.run(["ip", "netns", "del", ns], check=False)


class CampusLab(L.Lab):
    """The N-link topology; reuses lab.Lab's process handling (spawn, stop_proc, logs,
    private dbus, avahi start-up) but none of its namespaces."""

    def __init__(self, n_links, igmp_max_memberships=None, far_ipv6=True, avahi_extra=()):
        """`far_ipv6=False`: the far ends answer IPv4 mDNS only (devices without IPv6),
        which shows the links where the router's avahi-daemon has no IPv4 membership."""
        super().__init__()
        if not 1 <= n_links <= MAX_LINKS:
            raise ValueError("n_links must be 1..%d" % MAX_LINKS)
        self.links = [Link(i) for i in range(1, n_links + 1)]
        self.igmp_max = igmp_max_memberships
        self.far_ipv6 = far_ipv6
        self.avahi_extra = list(avahi_extra)
        self.dbus_addr = "unix:path=%s/dbus.sock" % self.dir
        self.proxies = {}   # name -> (port, admin port)

    # ---- topology --------------------------------------------------------------
    def _batch(self, ns, lines, timeout=120):
        """Many `ip` commands in one process (400 veths are ~2000 commands)."""
        path = os.path.join(self.dir, "ip-%s.batch" % (ns or "root"))
        self._write(path, "\n".join(lines) + "\n")
        L.run(["ip"] + (["-n", ns] if ns else []) + ["-batch", path], timeout=timeout)

    def _topology(self):
        for ns in (NS_CR, NS_CF):
            L.run(["ip", "netns", "add", ns])
            sysctls = ["net.ipv6.conf.%s.%s=0" % (k, v) for k in ("all", "default")
                       for v in ("accept_dad", "dad_transmits")]
            # 400 interfaces' router solicitations and MLD reports are noise here
            sysctls += ["net.ipv6.conf.default.router_solicitations=0"]
            if ns == NS_CR and self.igmp_max is not None:
                sysctls.append("net.ipv4.igmp_max_memberships=%d" % self.igmp_max)
            L.nsrun(ns, ["sysctl", "-q", "-w"] + sysctls)
            L.nsrun(ns, ["ip", "link", "set", "lo", "up"])
        self._batch(None, ["link add %s netns %s type veth peer name %s netns %s"
                           % (ln.router_if, NS_CR, ln.far_if, NS_CF) for ln in self.links])
        for ns, side in ((NS_CR, "router"), (NS_CF, "far")):
            cmds = []
            for ln in self.links:
                ifn = getattr(ln, side + "_if")
                cmds += ["addr add %s/31 dev %s" % (getattr(ln, side + "_v4"), ifn),
                         "addr add %s/64 dev %s nodad" % (getattr(ln, side + "_v6"), ifn),
                         "link set %s multicast on up" % ifn]
            self._batch(ns, cmds)

        def ll_ready():
            for ns in (NS_CR, NS_CF):
                out = L.nsrun(ns, ["ip", "-6", "-o", "addr", "show", "scope", "link"]).stdout
                if out.count("fe80") < len(self.links) or "tentative" in out:
                    return False
            return True
        L.wait_for(ll_ready, 30, what="IPv6 link-local addresses on every link")

    # ---- daemons ---------------------------------------------------------------
    def avahi_conf(self):
        lines = ["[server]", "host-name=campus-router", "domain-name=local", "use-ipv4=yes",
                 "use-ipv6=yes", "enable-dbus=yes", "ratelimit-interval-usec=1000000",
                 "ratelimit-burst=1000"] + self.avahi_extra
        lines += ["", "[wide-area]", "enable-wide-area=no", "", "[publish]",
                  "disable-publishing=yes", "", "[reflector]", "enable-reflector=no", ""]
        return "\n".join(lines)

    def _wait_avahi_bus(self, timeout=30):
        self.wait_avahi_on_bus(NS_CR, "avahi-cr", self.dbus_addr, timeout)

    def restart_avahi(self, igmp_max_memberships):
        """Restart the router's avahi-daemon with the sysctl at `igmp_max_memberships` (it
        applies to sockets' next joins only); returns its new log once it has started."""
        L.nsrun(NS_CR, ["sysctl", "-q", "-w", "net.ipv4.igmp_max_memberships=%d" % igmp_max_memberships])
        self.igmp_max = igmp_max_memberships
        self.stop_proc("avahi-cr")
        offset = os.path.getsize(self.logs["avahi-cr"])
        self.spawn_avahi(NS_CR, "avahi-cr", self.avahi_conf(), (), self.dbus_addr)

        def new_log():
            with open(self.logs["avahi-cr"], "rb") as f:
                f.seek(offset)
                return f.read().decode("utf-8", "replace")
        L.wait_for(lambda: "Server startup complete" in new_log(), 30,
                   what="avahi-daemon in %s to start" % NS_CR)
        self._wait_avahi_bus()
        return new_log()

    def _responder(self):
        import select
        self.spawn(NS_CF, ["/usr/bin/python3", os.path.abspath(__file__), "respond",
                           str(len(self.links))] + ([] if self.far_ipv6 else ["v4only"]),
                   "responder-cf", stdout=subprocess.PIPE)
        p = self.procs["responder-cf"]
        r, _w, _x = select.select([p.stdout], [], [], 60)
        line = p.stdout.readline().decode() if r else ""
        if line.strip() != "READY":
            raise RuntimeError("campus responder did not start: %r\n%s" % (
                line, self.log_text("responder-cf")))

    def start(self, with_proxy=False):
        with self.starting(cleanup_stale):
            t0 = time.monotonic()
            self._topology()
            self.topology_s = time.monotonic() - t0
            self.spawn_dbus(NS_CR, "dbus-daemon", self.dbus_addr)
            self.spawn_avahi(NS_CR, "avahi-cr", self.avahi_conf(), (), self.dbus_addr)
            self._responder()
            self._wait_avahi_bus()
            self.up = True
            if with_proxy:
                self.start_proxy()
        return self

    def stop(self):
        for name in list(self.procs)[::-1]:
            self.stop_proc(name)
        cleanup_stale()
        self.stopped()

    # ---- proxy -----------------------------------------------------------------
    def proxy_config(self, links, port, extra=""):
        """The proxy's YAML: one links: entry per link (interface and zone)."""
        out = ["links:"]
        for ln in links:
            out += ["  - interface: %s" % ln.router_if, "    domain: \"%s\"" % ln.zone]
        out += ["listen: [\"%s:%d\"]" % (PROXY_ADDR, port),
                "admin: \"%s:%d\"" % (PROXY_ADDR, port + 3000),
                "server-name: %s" % SERVER_NAME]
        return "\n".join(out) + "\n" + extra

    def start_proxy(self, name="proxy", port=5300, links=None, extra="", binary=None,
                    log_level="info", timeout=120):
        """Start a proxy serving `links` (default all); wait until every zone answers its
        SOA. Returns the seconds from spawn to the last zone answering."""
        links = self.links if links is None else links
        binary = binary or self.proxy_bin()
        cfg = os.path.join(self.dir, name + ".yaml")
        self._write(cfg, self.proxy_config(links, port, extra))
        t0 = time.monotonic()
        self.spawn(NS_CR, [binary, "--config", cfg, "--log-level", log_level], name,
                   env_extra={"DBUS_SYSTEM_BUS_ADDRESS": self.dbus_addr})
        self.proxies[name] = (port, port + 3000)
        pending = [ln.zone for ln in links]

        def all_soa():
            self.check_alive(name)
            pending[:] = [z for z in pending if not self.soa_ok(z, port)]
            return not pending
        L.wait_for(all_soa, timeout, interval=0.2,
                   what=lambda: "%s: %d zones not answering SOA (e.g. %s)" % (
                       name, len(pending), pending[:3]))
        if name == "proxy":
            self.proxy = self.procs[name]
        return time.monotonic() - t0

    def ask(self, qname, rdtype, port=5300, timeout=5.0, tcp=False):
        """One query from the router namespace; (response or None, seconds)."""
        import dns.exception
        import dns.message
        import dns.query
        q = dns.message.make_query(qname, rdtype, use_edns=0, payload=1232)
        with L.netns(NS_CR):
            t0 = time.perf_counter()
            try:
                fn = dns.query.tcp if tcp else dns.query.udp
                r = fn(q, PROXY_ADDR, port=port, timeout=timeout)
            except dns.exception.Timeout:
                r = None
            return r, time.perf_counter() - t0

    def soa_ok(self, zone, port):
        import dns.rcode
        import dns.rdatatype
        r, _s = self.ask(zone, "SOA", port, timeout=0.25)  # polled: before the listener is up nothing answers
        return r is not None and r.rcode() == dns.rcode.NOERROR and any(
            rr.rdtype == dns.rdatatype.SOA for rr in r.answer)

    def pid(self, name):
        return self.procs[name].pid   # `ip netns exec` execs the command

    def rss_kib(self, name):
        with open("/proc/%d/status" % self.pid(name)) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS for %s" % name)


# --------------------------------------------------------------------------------
# The far side's responder (runs in NS_CF): answers for link i on cf<i> only.
# --------------------------------------------------------------------------------

class Responder:
    def __init__(self, links, families=(socket.AF_INET, socket.AF_INET6)):
        self.by_fd = {}   # fd -> (socket, Link, family)
        for ln in links:
            ifindex = socket.if_nametoindex(ln.far_if)
            for fam in families:
                s = self._socket(fam, ln.far_if, ifindex)
                self.by_fd[s.fileno()] = (s, ln, fam)

    @staticmethod
    def _socket(fam, ifname, ifindex):
        import struct
        s = socket.socket(fam, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
        if fam == socket.AF_INET:
            s.setsockopt(socket.IPPROTO_IP, 49, 0)   # IP_MULTICAST_ALL off: our group only
            s.bind(("0.0.0.0", MDNS_PORT))
            mreqn = socket.inet_aton(MDNS_V4) + socket.inet_aton("0.0.0.0") + struct.pack("@i", ifindex)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreqn)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, mreqn)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 255)
            s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 0)
        else:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            s.setsockopt(socket.IPPROTO_IPV6, 29, 0)  # IPV6_MULTICAST_ALL off
            s.bind(("::", MDNS_PORT))
            mreq = socket.inet_pton(socket.AF_INET6, MDNS_V6) + struct.pack("@I", ifindex)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, mreq)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, ifindex)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 0)
        return s

    @staticmethod
    def records(ln, qname, qtype):
        """(answers, additionals) of link `ln` for one question: lists of rrsets."""
        import dns.name
        import dns.rdataclass as C
        import dns.rdatatype as T
        import dns.rrset

        def rr(owner, rdtype, *texts):
            return dns.rrset.from_text(owner, TTL, C.IN, rdtype, *texts)

        def esc(label):
            return dns.name.Name([label.encode(), b"_tcp", b"local"]).to_text()

        host = "%s.local." % ln.host
        addrs = [rr(host, T.A, ln.far_v4), rr(host, T.AAAA, ln.far_v6)]

        def service(stype, inst, port, txt):
            owner = dns.name.Name([inst.encode()] + [x.encode() for x in stype.split(".")] + [b"local", b""])
            srv = rr(owner, T.SRV, "0 0 %d %s" % (port, host))
            txtr = rr(owner, T.TXT, " ".join('"%s"' % t.decode() for t in txt))
            return owner, srv, txtr

        types = {"_ipp._tcp": (ln.instance, 631, ln.txt)}
        first = qname.labels[0].decode("ascii", "replace").lower() if qname.labels else ""
        if first.startswith("_c") and first[2:].isdigit():
            stype = "%s._tcp" % first
            types[stype] = (ln.cold_instance(stype), 9000, [b"cold=1"])
        q = qname.to_text().lower()
        if q == "_services._dns-sd._udp.local.":
            if qtype in (T.PTR, T.ANY):
                return [rr(q, T.PTR, "_ipp._tcp.local.")], []
            return [], []
        if q == host.lower():
            return [a for a in addrs if qtype in (a.rdtype, T.ANY)], []
        for stype, (inst, port, txt) in types.items():
            owner, srv, txtr = service(stype, inst, port, txt)
            if q == "%s.local." % stype and qtype in (T.PTR, T.ANY):
                return [rr(q, T.PTR, owner.to_text())], [srv, txtr] + addrs
            if qname == owner:
                return [x for x in (srv, txtr) if qtype in (x.rdtype, T.ANY)], addrs
        return [], []

    def answer(self, sock, ln, fam, data, src):
        import dns.flags
        import dns.message
        try:
            q = dns.message.from_wire(data)
        except Exception:  # noqa: BLE001 - not for us
            return
        if q.flags & dns.flags.QR:
            return
        r = dns.message.Message(id=0 if src[1] == MDNS_PORT else q.id)
        r.flags = dns.flags.QR | dns.flags.AA
        for question in q.question:
            ans, add = self.records(ln, question.name, question.rdtype)
            for a in ans:
                if a not in r.answer:
                    r.answer.append(a)
            for a in add:
                if a not in r.additional and a not in r.answer:
                    r.additional.append(a)
        if not r.answer:
            return
        if src[1] != MDNS_PORT:         # legacy unicast (RFC 6762 §6.7): echo the question
            r.question = q.question
            sock.sendto(r.to_wire(), src)
        elif fam == socket.AF_INET:
            sock.sendto(r.to_wire(), (MDNS_V4, MDNS_PORT))
        else:
            sock.sendto(r.to_wire(), (MDNS_V6, MDNS_PORT, 0, socket.if_nametoindex(ln.far_if)))

    def serve(self):
        import selectors
        sel = selectors.DefaultSelector()
        for fd, (s, _ln, _fam) in self.by_fd.items():
            sel.register(s, selectors.EVENT_READ)
        print("READY", flush=True)
        while True:
            for key, _ev in sel.select():
                s, ln, fam = self.by_fd[key.fd]
                try:
                    data, src = s.recvfrom(9000)
                    self.answer(s, ln, fam, data, src)
                except OSError as e:
                    print("link %d: %s" % (ln.i, e), file=sys.stderr, flush=True)


def main(argv):
    if len(argv) > 2 and argv[1] == "respond":
        fams = (socket.AF_INET,) if "v4only" in argv[3:] else (socket.AF_INET, socket.AF_INET6)
        Responder([Link(i) for i in range(1, int(argv[2]) + 1)], fams).serve()
        return 0
    if len(argv) > 1 and argv[1] == "down":
        cleanup_stale()
        return 0
    n = int(argv[2]) if len(argv) > 2 else 20
    os.environ.setdefault("DPT_KEEP_LOGS", "1")
    lab = CampusLab(n, igmp_max_memberships=n + 16)
    lab.start(with_proxy=True)
    print("campus lab up with %d links; dir %s - press Enter to tear down" % (n, lab.dir))
    try:
        sys.stdin.readline()
    finally:
        lab.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
