"""Campus lab (issue 16): two routers, an HA pair of proxies on a shared link, and one link
per router, ONE proxy per router, under one parent zone printed by the proxies themselves
(RFC 8766 §6.2)::

                      dpt-[<id>-]cs: bridge br-s 192.0.2.10/24 (avahi responder "shared-host")
                         |  192.0.2.0/24, 2001:db8:10::/64: the shared link, both routers on it
              r-s .1 ----+---- r-s .2
    dpt-[<id>-]cr1 (router 1)          dpt-[<id>-]cr2 (router 2)
      proxy ha1 = ns1.example.           proxy ha2 = ns2.example.
        on 203.0.113.1, 2001:db8:30::1     on 203.0.113.2, 2001:db8:30::2
        shared.example. (r-s)              shared.example. (r-s)
        r1.example. (r-own)                r2.example. (r-own)
      r-own 198.51.100.1/24 -- dpt-ca    r-own 203.0.113.129/25 -- dpt-cb
        (link A, responder "host-a")       (link B, responder "host-b")
              r-c ---------+--------- r-c
                       dpt-[<id>-]cc: bridge br-c 203.0.113.10/25, 2001:db8:30::10/64
                         knotd on 127.0.0.2 (".", "example.", "in-addr.arpa.")
                         one recursive resolver on 127.0.0.1:53 (resolver_lab's configurations)

* Each router has its own private dbus-daemon and query-only avahi-daemon on r-s and r-own.
* Each router runs one proxy, as a site would: ha1 and ha2 share the top-level
  `name-servers: [ns1.example., ns2.example.]` (the shared link's zones: both answer its
  apex NS with both and the same SOA), and each names only itself for its own link with the
  per-link `links[].name-servers` (link A's zones are ns1.example.'s alone, link B's
  ns2.example.'s: the fellow proxy is not on that link and would be a lame delegation).
* The parent zone is the concatenation of the two proxies' `--print-parent-zone` output
  (resolver_lab.parent_records()), put under knotd's apexes.
* break_proxy(name, "sigterm"|"silent") stops ha1 or ha2 (the kernel then answers ICMP port
  unreachable) or makes its router silent on port 53 (nft drop, like a dead machine);
  heal() undoes either.  Either also takes that router's own link offline for the
  duration (its only proxy); the failover tests ask the shared zone only.  sent_to() reads
  which proxy the resolver asked (tcpdump on br-c).

Every address is from the documentation ranges; nothing runs on the host.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

import lab as L
import resolver_lab as RL

NS_R1, NS_R2 = L.NS_PREFIX + "cr1", L.NS_PREFIX + "cr2"
NS_S, NS_A, NS_B, NS_C = (L.NS_PREFIX + x for x in ("cs", "ca", "cb", "cc"))
NAMESPACES = (NS_R1, NS_R2, NS_S, NS_A, NS_B, NS_C)

ZONE_S, ZONE_A, ZONE_B = "shared.example.", "r1.example.", "r2.example."
C_V4, C_V6 = "203.0.113.10", "2001:db8:30::10"

SHARED_SERVICES = [("Shared Printer", "_ipp._tcp", 631, [], [b"rp=shared"]),
                   ("Shared Web", "_http._tcp", 80, [], [b"path=/"])]
A_SERVICES = [("Printer A", "_ipp._tcp", 631, [], [b"rp=a"])]
B_SERVICES = [("Printer B", "_ipp._tcp", 631, [], [b"rp=b"])]

# per router: namespace, shared-link address, own link (ns, subnet addresses, far addresses,
# zone, services, far host), and its proxy (name, server-name, v4, v6, admin port)
ROUTERS = {
    1: dict(ns=NS_R1, s4="192.0.2.1", s6="2001:db8:10::1",
            own=(NS_A, "198.51.100.1/24", "2001:db8:11::1", "198.51.100.10/24", "2001:db8:11::10",
                 ZONE_A, A_SERVICES, "host-a"),
            proxy=("ha1", "ns1.example.", "203.0.113.1", "2001:db8:30::1", 8301)),
    2: dict(ns=NS_R2, s4="192.0.2.2", s6="2001:db8:10::2",
            own=(NS_B, "203.0.113.129/25", "2001:db8:12::1", "203.0.113.138/25", "2001:db8:12::10",
                 ZONE_B, B_SERVICES, "host-b"),
            proxy=("ha2", "ns2.example.", "203.0.113.2", "2001:db8:30::2", 8301)),
}
HA = ("ha1", "ha2")                 # the proxies, one per router
HA_SERVERS = ["ns1.example.", "ns2.example."]
# the links' reverse zones, as the proxies print them: the shared link's, link A's and link B's
# (203.0.113.128/25: the enclosing /24 zone)
REV_S, REV_A, REV_B = "2.0.192.in-addr.arpa.", "100.51.198.in-addr.arpa.", "113.0.203.in-addr.arpa."
NFT_TABLE = "dpt_campus_silent"


def proxy(name):
    """(router number, namespace, server-name, v4, v6, admin port, own zone) of `name`."""
    for n, r in ROUTERS.items():
        if r["proxy"][0] == name:
            return (n, r["ns"]) + r["proxy"][1:] + (r["own"][5],)
    raise KeyError(name)


class CampusLab:
    def __init__(self):
        self.p = L.Lab()        # process bookkeeping and logs only (its own namespaces unused)
        self.dir = self.p.dir
        self.records = {}
        self.printed = {}       # proxy name -> its --print-parent-zone text
        self.kind = None
        self.pcap = None
        self.broken = None
        self.dbus = {}          # router number -> its private system bus address
        self._runs = 0

    # ---- topology -------------------------------------------------------------
    def start(self):
        cleanup()
        atexit.register(self.stop)
        try:
            self._netns()
            for n in ROUTERS:
                self._router_daemons(n)
            self.p.spawn_avahi(NS_S, "avahi-s", self.p._avahi_conf("shared-host", ["br-s"], False, True),
                               SHARED_SERVICES)
            for n, r in ROUTERS.items():
                far_ns, *_x, services, host = r["own"]
                self.p.spawn_avahi(far_ns, "avahi-far%d" % n, self.p._avahi_conf(host, ["far"], False, True),
                                   services)
            for r in ROUTERS.values():
                name = r["proxy"][0]
                self.printed[name] = self._print_parent_zone(name)
                self.start_proxy(name)
            self.records = RL.parent_records(*self.printed.values())
            RL.start_knot(self.p, NS_C, os.path.join(self.dir, "knot"), self.records)
            self._wait_services()
        except BaseException:
            self.p.dump_logs()
            self.stop()
            raise
        return self

    def stop(self):
        self.stop_resolver()
        for name in list(self.p.procs)[::-1]:
            self.p.stop_proc(name)
        cleanup()
        if os.environ.get("DPT_KEEP_LOGS") is None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _netns(self):
        for ns in NAMESPACES:
            L.run(["ip", "netns", "add", ns])
            for k in ("all", "default"):
                L.nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.%s.accept_dad=0" % k])
                L.nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.%s.dad_transmits=0" % k])
            L.nsrun(ns, ["ip", "link", "set", "lo", "up"])
        # the two segments both routers attach to: bridges in the shared-link and client
        # namespaces (mDNS to ff02::fb must reach every port: no multicast snooping)
        for ns, br, v4, v6 in ((NS_S, "br-s", "192.0.2.10/24", "2001:db8:10::10"),
                               (NS_C, "br-c", C_V4 + "/25", C_V6)):
            L.nsrun(ns, ["ip", "link", "add", br, "type", "bridge", "mcast_snooping", "0"])
            self._addr(ns, br, v4, v6)
        for n, r in ROUTERS.items():
            ns = r["ns"]
            self._veth(ns, "r-s", NS_S, "s-r%d" % n, master="br-s")
            self._addr(ns, "r-s", r["s4"] + "/24", r["s6"])
            self._veth(ns, "r-c", NS_C, "c-r%d" % n, master="br-c")
            _name, _sn, v4, v6, _admin = r["proxy"]
            self._addr(ns, "r-c", v4 + "/25", v6)
            far_ns, r4, r6, f4, f6, *_x = r["own"]
            self._veth(ns, "r-own", far_ns, "far")
            self._addr(ns, "r-own", r4, r6)
            self._addr(far_ns, "far", f4, f6)

    @staticmethod
    def _veth(ns, ifn, peer_ns, peer, master=None):
        L.run(["ip", "link", "add", ifn, "netns", ns, "type", "veth", "peer", "name", peer,
               "netns", peer_ns])
        L.nsrun(peer_ns, ["ip", "link", "set", peer] + (["master", master] if master else []) + ["up"])

    @staticmethod
    def _addr(ns, ifn, v4, v6):
        L.nsrun(ns, ["ip", "addr", "add", v4, "dev", ifn])
        L.nsrun(ns, ["ip", "-6", "addr", "add", v6 + "/64", "dev", ifn, "nodad"])
        L.nsrun(ns, ["ip", "link", "set", ifn, "multicast", "on", "up"])

    def _router_daemons(self, n):
        ns = ROUTERS[n]["ns"]
        addr = "unix:path=%s/dbus-r%d.sock" % (self.dir, n)
        self.dbus[n] = addr
        self.p.spawn_dbus(ns, "dbus-r%d" % n, addr)
        self.p.spawn_avahi(ns, "avahi-r%d" % n,
                           self.p._avahi_conf("router%d" % n, ["r-s", "r-own"], True, False), (), addr)

    # ---- proxies --------------------------------------------------------------
    def config(self, name):
        """The proxy's YAML (written once): the HA pair share the top-level name-servers for
        the shared link (RFC 8766 §6.2); the router's own link names this proxy alone."""
        _n, _ns, server, v4, v6, _admin, own = proxy(name)
        path = os.path.join(self.dir, name + ".yaml")
        if not os.path.exists(path):
            RL.write_file(path, "server-name: %s\nname-servers: [%s]\n"
                          "listen: [\"%s:53\", \"[%s]:53\"]\nlinks:\n"
                          "  - {interface: r-s, domain: %s}\n"
                          "  - {interface: r-own, domain: %s, name-servers: [%s]}\n"
                          % (server, ", ".join(HA_SERVERS), v4, v6, ZONE_S, own, server))
        return path

    def _print_parent_zone(self, name):
        return L.nsrun(proxy(name)[1], [L.Lab.proxy_bin(), "--config", self.config(name),
                                        "--print-parent-zone"]).stdout

    def start_proxy(self, name, timeout=30):
        n, ns, _server, v4, _v6, admin, own = proxy(name)
        self.p.spawn(ns, [L.Lab.proxy_bin(), "--config", self.config(name), "--log-level", "info",
                          "--inventory-interval", "0", "--admin", "127.0.0.1:%d" % admin],
                     name, env_extra={"DBUS_SYSTEM_BUS_ADDRESS": self.dbus[n]})

        def soa():
            self.p.check_alive(name)
            return all(r.rcode() == dns.rcode.NOERROR and r.answer
                       for r in (self.ask_server(v4, z, dns.rdatatype.SOA, ns=ns, timeout=1)
                                 for z in (ZONE_S, own)))
        L.wait_for(soa, timeout, interval=0.2, what="%s to answer %s and %s SOA" % (name, ZONE_S, own))

    def ask_server(self, server, qname, rdtype, ns=NS_C, timeout=2.0):
        """One non-recursive query to a proxy (from the client namespace by default)."""
        q = dns.message.make_query(qname, rdtype)
        q.flags &= ~dns.flags.RD
        with L.netns(ns):
            return dns.query.udp(q, server, port=53, timeout=timeout)

    def _wait_services(self, names=None, timeout=40):
        """Until each proxy (all by default) finds the printers of both its links by mDNS
        (the responders' probing and announcing take a few seconds)."""
        want = {ZONE_S: "Shared Printer", ZONE_A: "Printer A", ZONE_B: "Printer B"}
        for name in names or HA:
            _n, ns, _s, v4, _v6, _a, own = proxy(name)
            for zone in (ZONE_S, own):
                inst = want[zone]

                def found():
                    r = self.ask_server(v4, "_ipp._tcp." + zone, dns.rdatatype.PTR, ns=ns)
                    return any(rd.target.labels[0] == inst.encode() for rs in r.answer for rd in rs)
                L.wait_for(found, timeout, interval=0.5, what="%s to browse %r" % (name, inst))

    # ---- failures of one HA proxy ----------------------------------------------
    def break_proxy(self, name, mode):
        """"sigterm": stop proxy `name` (ha1 or ha2; its addresses stay, so the kernel answers
        ICMP port unreachable); "silent": its router drops every DNS packet from the client
        segment (no answer, no ICMP: a dead machine, as a resolver sees it)."""
        self.broken = name
        if mode == "sigterm":
            self.p.stop_proc(name)
        elif mode == "silent":
            L.nsrun(proxy(name)[1], ["sh", "-c", "nft add table inet {t} && nft add chain inet {t} input "
                                     "'{{ type filter hook input priority -10; policy accept; }}' && "
                                     "nft add rule inet {t} input iifname r-c meta l4proto '{{ udp, tcp }}' "
                                     "th dport 53 drop".format(t=NFT_TABLE)])
        else:
            raise ValueError(mode)

    def heal(self):
        """Undo break_proxy: the proxy answers again (restarted if it was stopped)."""
        name, self.broken = self.broken, None
        if name is None:
            return
        L.nsrun(proxy(name)[1], ["nft", "delete", "table", "inet", NFT_TABLE], check=False)
        if name not in self.p.procs or self.p.procs[name].poll() is not None:
            self.p.stop_proc(name)
            self.start_proxy(name)
            self._wait_services([name])

    # ---- resolvers ----------------------------------------------------------------
    def start_resolver(self, kind, timeout=30):
        """`kind` cold (new directory and cache) on 127.0.0.1:53 in the client namespace, with
        resolver_lab's configuration for it and this lab's parent zone."""
        self.stop_resolver()
        self._runs += 1
        d = os.path.join(self.dir, "%s-%d" % (kind, self._runs))
        os.makedirs(d)
        cmd = RL.resolver_command(kind, d, self.records)
        self.kind = kind
        # what the resolver sends the proxies (client segment only), to see which it used
        self.pcap = os.path.join(d, "proxies.pcap")
        self.p.spawn(NS_C, ["tcpdump", "-i", "br-c", "-n", "-U", "--immediate-mode", "-s", "2048",
                            "-B", "8192", "-w", self.pcap, "port", "53"], "tcpdump-c",
                     stdout=subprocess.DEVNULL)
        L.wait_for(lambda: os.path.exists(self.pcap) and os.path.getsize(self.pcap) >= 24, 10,
                   what="tcpdump in the client namespace")
        self.p.spawn(NS_C, cmd, "resolver-" + kind)
        RL.wait_resolver(self.p, "resolver-" + kind, self.query, timeout)

    def stop_resolver(self):
        if self.kind is not None:
            self.p.stop_proc("resolver-" + self.kind)
        self.p.stop_proc("tcpdump-c")
        self.kind = None

    def sent_to(self, names, since):
        """[(wall-clock time, proxy name)] of the resolver's queries to the proxies `names`
        since `since`, in order."""
        addrs = {a: n for n in names for a in proxy(n)[3:5]}
        time.sleep(0.05)  # -U writes per packet; let the last ones land
        return [(ts, addrs[dst]) for ts, _src, _sp, dst, dport, msg in L.dns_packets(self.pcap)
                if ts >= since and dst in addrs and dport == 53 and not msg.flags & dns.flags.QR]

    def stub(self, name, rdtype, timeout=5.0, tries=2):
        """Ask as glibc's stub does (timeout:5 attempts:2): one socket, the same message sent
        again after a timeout or at once after SERVFAIL, so a forwarder sees a retransmission
        (dnsmasq then asks every server). Returns (response or None, [(outcome, seconds)] per
        try); the response is the NOERROR/NXDOMAIN one."""
        if isinstance(rdtype, str):
            rdtype = dns.rdatatype.from_text(rdtype)
        q = dns.message.make_query(name, rdtype, use_edns=0, payload=1232)
        wire, tries_out = q.to_wire(), []
        with L.netns(NS_C):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with sock:
            sock.connect((RL.RESOLVER_ADDR, 53))
            for _ in range(tries):
                t0 = time.monotonic()
                sock.send(wire)
                outcome, r = "timeout", None
                while time.monotonic() - t0 < timeout:
                    sock.settimeout(max(0.01, timeout - (time.monotonic() - t0)))
                    try:
                        r = dns.message.from_wire(sock.recv(65535))
                    except (socket.timeout, ConnectionRefusedError):
                        break
                    if r.id == q.id:
                        outcome = dns.rcode.to_text(r.rcode())
                        break
                tries_out.append((outcome, time.monotonic() - t0))
                if outcome in ("NOERROR", "NXDOMAIN"):
                    return r, tries_out
        return None, tries_out

    def query(self, name, rdtype, timeout=5.0):
        """ONE query with RD from the client to the resolver (as a stub sends it)."""
        if isinstance(rdtype, str):
            rdtype = dns.rdatatype.from_text(rdtype)
        q = dns.message.make_query(name, rdtype, use_edns=0, payload=1232)
        with L.netns(NS_C):
            return dns.query.udp(q, RL.RESOLVER_ADDR, port=53, timeout=timeout)

    def logs(self, names, tail=30):
        return "\n".join("--- %s ---\n%s" % (n, self.p.log_text(n, tail)) for n in names)


def cleanup():
    """Kill what runs in this lab's namespaces (by PID) and delete them; nothing else."""
    present = [ns for ns in NAMESPACES if ns in L.list_netns()]
    pids = [int(p) for ns in present for p in L.run(["ip", "netns", "pids", ns], check=False).stdout.split()]
    for pid in pids:
        L.kill_pid(pid, signal.SIGTERM)
    deadline = time.monotonic() + 3
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if os.path.exists("/proc/%d" % p)]
        time.sleep(0.1)
    for pid in pids:
        L.kill_pid(pid, signal.SIGKILL)
    for ns in present:
        L.run(["ip", "netns", "del", ns], check=False)
    with contextlib.suppress(Exception):
        L.wait_for(lambda: not set(NAMESPACES) & set(L.list_netns()), 5, what="namespaces gone")
