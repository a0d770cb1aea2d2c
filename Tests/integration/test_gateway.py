"""The mDNS gateway (issue 26): `links[].announce` publishes a far link's allowed services on
a client link over mDNS, through the router's avahi-daemon, for clients that never ask
unicast DNS: avahi-daemon with wide-area browsing off (as Debian ships it) and a
python-zeroconf ServiceBrowser.

A topology of its own, beside the session lab::

    NS_GF [bridge br-f 192.0.2.10/24]       avahi-daemon responder (host gwfar): Gw Printer
       |  (far link, lab1.example.)          (_ipp._tcp 631), Gw Web (_http._tcp, not allowed),
       |                                     Shared Name (_ipp._tcp 632); a TCP listener on 631
    NS_GR [dgr-f 192.0.2.1/24]              proxy on 127.0.0.1:5320, avahi-daemon (publishing on,
          [dgr-c 198.51.100.1/24]           own D-Bus), IPv4 forwarding
       |  (client link, lab2.example., announce: from lab1.example., allow _ipp._tcp)
    NS_GC [bridge br-c 198.51.100.10/24]    avahi-daemon (own D-Bus, wide-area off) publishing its
                                            own Shared Name (_ipp._tcp 9); python-zeroconf browser

`GatewayLab(lab, routers=2)` adds a second router, NS_GR2 (192.0.2.2, 198.51.100.2), on the
same two links with the same configuration: the HA pair of test_gateway_ha.py.

`GatewayLab(lab, client_links=N)` adds client links 2 .. N (at most 64) to the one router,
for scripts/bench/gateway_links.py: a veth each, dgr-c<k> in NS_GR to gc-<k> in NS_GK (no
bridge), /30s cut from 203.0.113.0/24 (link k: router 203.0.113.<4(k-2)+1>, client end +1),
zone lab-c<k>.example. NS_GK is not NS_GC: a python-zeroconf client on link 1 binds
0.0.0.0:5353 and would hear every link of its namespace. The router's net.ipv4.igmp_max_memberships is raised to N + 16: its
avahi-daemon joins 224.0.0.251 on every interface through one socket.
"""

import json
import os
import signal
import socket
import subprocess
import time

import dns.rdatatype
import pytest

import lab as L

NS_GR, NS_GR2, NS_GF, NS_GC = L.NS_PREFIX + "gr", L.NS_PREFIX + "gr2", L.NS_PREFIX + "gf", L.NS_PREFIX + "gc"
NS_GK = L.NS_PREFIX + "gk"     # client links 2 .. N (client_links=N)
PORT = 5320
HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"

FAR_TXT = [b"rp=printers/gw", b"note=far link", b"flag"]
FAR_SERVICES = [
    ("Gw Printer", "_ipp._tcp", 631, ["_universal._sub._ipp._tcp"], FAR_TXT),
    ("Gw Web", "_http._tcp", 80, [], [b"path=/"]),
    ("Shared Name", "_ipp._tcp", 632, [], [b"rp=far"]),
]
CLIENT_SERVICES = [("Shared Name", "_ipp._tcp", 9, [], [b"rp=local"])]

CONFIG = """\
server-name: ns.example.
listen: ["127.0.0.1:%(port)d"]
admin: "127.0.0.1:%(admin)d"
inventory-interval: 0
log-level: %(log)s
links:
  - interface: dgr-f
    domain: lab1.example.
  - interface: dgr-c
    domain: lab2.example.
    announce:
      - from: lab1.example.
        services: {allow: [%(types)s]}
%(subtypes)s"""


def config(types=("_ipp._tcp",), subtypes=("_universal._sub._ipp._tcp",), log="debug"):
    """The gateway proxies' configuration (also scripts/bench/gateway.py's): dgr-c announces
    lab1.example.'s `types` and `subtypes`."""
    listed = "        subtypes: [%s]\n" % ", ".join(subtypes) if subtypes else ""
    return CONFIG % {"port": PORT, "admin": PORT + 3000, "log": log, "types": ", ".join(types), "subtypes": listed}

def links_config(links, types=("_ipp._tcp",), log="info", extra=""):
    """The proxy's configuration with client links 1 .. `links` (`GatewayLab(client_links=)`)
    each announcing lab1.example.'s `types` (also scripts/bench/gateway_links.py's)."""
    out = ["server-name: ns.example.", 'listen: ["127.0.0.1:%d"]' % PORT, 'admin: "127.0.0.1:%d"' % (PORT + 3000),
           "inventory-interval: 0", "log-level: %s" % log] + ([extra] if extra else [])
    out += ["links:", "  - interface: dgr-f", "    domain: lab1.example."]
    for k in range(1, links + 1):
        rif, _cif, _r, _c, _p, zone = client_link(k)
        out += ["  - interface: %s" % rif, "    domain: %s" % zone, "    announce:",
                "      - from: lab1.example.", "        services: {allow: [%s]}" % ", ".join(types)]
    return "\n".join(out) + "\n"


LISTENER = r"""
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("192.0.2.10", 631))
s.listen(8)
while True:
    c, _ = s.accept()
    c.sendall(b"far printer\n")
    c.close()
"""


MAX_CLIENT_LINKS = 64      # /30s of 203.0.113.0/24, plus link 1


def client_link(k):
    """Client link k (1-based): (router interface, client-namespace interface, router address,
    client address, prefix length, zone)."""
    if k == 1:
        return "dgr-c", "br-c", "198.51.100.1", "198.51.100.10", 24, "lab2.example."
    base = 4 * (k - 2)
    return ("dgr-c%d" % k, "gc-%d" % k, "203.0.113.%d" % (base + 1), "203.0.113.%d" % (base + 2), 30,
            "lab-c%d.example." % k)


class GatewayLab:
    def __init__(self, lab, routers=1, client_links=1):
        assert 1 <= client_links <= MAX_CLIENT_LINKS and (routers == 1 or client_links == 1)
        self.lab = lab
        self.client_links = client_links
        # namespace, process name prefix, far-link address, client-link address
        self.routers = [(NS_GR, "gw", "192.0.2.1", "198.51.100.1"),
                        (NS_GR2, "gw2", "192.0.2.2", "198.51.100.2")][:routers]
        self.dbus_c = "unix:path=%s/gw-c-dbus.sock" % lab.dir
        self.config = os.path.join(lab.dir, "gateway.yaml")
        self.far_dir = None

    def router_dbus(self, prefix):
        return "unix:path=%s/%s-r-dbus.sock" % (self.lab.dir, prefix)

    def start(self):
        namespaces = [r[0] for r in self.routers] + [NS_GF, NS_GC] + ([NS_GK] if self.client_links > 1 else [])
        for ns in namespaces:
            L.run(["ip", "netns", "del", ns], check=False)  # left by a run that was killed
            L.run(["ip", "netns", "add", ns])
            L.nsrun(ns, ["ip", "link", "set", "lo", "up"])
        # The two links are bridges, so that more than one router can attach to each (no
        # multicast snooping: mDNS must reach every port).
        for ns, br, v4 in ((NS_GF, "br-f", "192.0.2.10"), (NS_GC, "br-c", "198.51.100.10")):
            L.nsrun(ns, ["ip", "link", "add", br, "type", "bridge", "mcast_snooping", "0"])
            L.nsrun(ns, ["ip", "addr", "add", v4 + "/24", "dev", br])
            L.nsrun(ns, ["ip", "link", "set", br, "multicast", "on", "up"])
        for index, (ns, prefix, far_v4, client_v4) in enumerate(self.routers):
            L.nsrun(ns, ["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"])
            for rif, peer_ns, br, v4 in (("dgr-f", NS_GF, "br-f", far_v4), ("dgr-c", NS_GC, "br-c", client_v4)):
                peer = "%s-%d" % (rif, index)
                L.run(["ip", "link", "add", rif, "netns", ns, "type", "veth", "peer", "name", peer, "netns", peer_ns])
                L.nsrun(peer_ns, ["ip", "link", "set", peer, "master", br, "up"])
                L.nsrun(ns, ["ip", "addr", "add", v4 + "/24", "dev", rif])
                L.nsrun(ns, ["ip", "link", "set", rif, "multicast", "on", "up"])
            self.lab.spawn_dbus(ns, prefix + "-dbus-r", self.router_dbus(prefix))
            self.lab.spawn_avahi(ns, prefix + "-avahi-r",
                                 self.lab._avahi_conf(prefix + "-router", ["dgr-f", "dgr-c"], True, publish=True),
                                 (), self.router_dbus(prefix))
            self.lab.wait_avahi_on_bus(ns, prefix + "-avahi-r", self.router_dbus(prefix))
        self._extra_client_links()
        L.nsrun(NS_GF, ["ip", "route", "add", "default", "via", "192.0.2.1"])
        L.nsrun(NS_GC, ["ip", "route", "add", "default", "via", "198.51.100.1"])
        self.lab.spawn_dbus(NS_GC, "gw-dbus-c", self.dbus_c)
        self.start_far_avahi()
        self.lab.spawn_avahi(NS_GC, "gw-avahi-c",
                             self.lab._avahi_conf("gw-client", ["br-c"], True, publish=True),
                             CLIENT_SERVICES, self.dbus_c)
        self.lab.wait_avahi_on_bus(NS_GC, "gw-avahi-c", self.dbus_c)
        self.lab.spawn(NS_GF, [PY, "-c", LISTENER], "gw-listener")
        with open(self.config, "w") as f:
            f.write(config())

    def _extra_client_links(self):
        """Client links 2 .. client_links (see the module's docstring)."""
        if self.client_links == 1:
            return
        L.nsrun(NS_GR, ["sysctl", "-q", "-w", "net.ipv4.igmp_max_memberships=%d" % (self.client_links + 16)])
        for k in range(2, self.client_links + 1):
            rif, cif, rv4, cv4, plen, _zone = client_link(k)
            L.run(["ip", "link", "add", rif, "netns", NS_GR, "type", "veth", "peer", "name", cif, "netns", NS_GK])
            for ns, ifname, v4 in ((NS_GR, rif, rv4), (NS_GK, cif, cv4)):
                L.nsrun(ns, ["ip", "addr", "add", "%s/%d" % (v4, plen), "dev", ifname])
                L.nsrun(ns, ["ip", "link", "set", ifname, "multicast", "on", "up"])

    def start_far_avahi(self):
        self.lab.spawn_avahi(NS_GF, "gw-avahi-f",
                             self.lab._avahi_conf("gwfar", ["br-f"], False, publish=True), FAR_SERVICES)
        self.far_dir = os.path.join(self.lab.dir, "gw-avahi-f", "services")

    def start_proxy(self, router=0):
        ns, prefix, _f, _c = self.routers[router]
        cmd = [self.lab.proxy_bin(), "--config", self.config]
        proc = self.lab.spawn(ns, cmd, prefix + "-proxy", env_extra={"DBUS_SYSTEM_BUS_ADDRESS": self.router_dbus(prefix)})

        def soa_ok():
            self.lab.check_alive(prefix + "-proxy")
            import dns.message
            import dns.query
            q = dns.message.make_query("lab1.example.", "SOA")
            with L.netns(ns):
                return dns.query.udp(q, "127.0.0.1", port=PORT, timeout=1).answer
        L.wait_for(soa_ok, 30, interval=0.3, what="the gateway proxy in %s to answer" % ns)
        return proc

    def browse(self, stype="_ipp._tcp", seconds=3):
        """python-zeroconf on the client link: {instance label: resolved info}."""
        r = L.nsrun(NS_GC, [PY, os.path.join(HERE, "gateway_browser.py"), "198.51.100.10", stype, str(seconds)],
                    check=False, timeout=60)
        found = {}
        for line in r.stdout.splitlines():
            info = json.loads(line)
            found[info["name"].split("." + stype)[0]] = info
        return found

    def avahi_browse(self, stype):
        """avahi-browse -r on the client link (its own avahi-daemon): {name: resolved line fields}."""
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.dbus_c)
        r = L.nsrun(NS_GC, ["avahi-browse", "-r", "-t", "-p", stype], check=False, env=env, timeout=30)
        found = {}
        for line in r.stdout.splitlines():
            f = line.split(";")
            if f[0] == "=" and f[2] == "IPv4":
                found[L.avahi_unescape(f[3])] = {"host": f[6], "address": f[7], "port": int(f[8]), "txt": f[9]}
        return found

    def wait_browse(self, pred, what, stype="_ipp._tcp", timeout=30):
        last = {}

        def ok():
            last["v"] = self.browse(stype)
            return pred(last["v"])
        try:
            L.wait_for(ok, timeout, interval=0.5, what=what)
        except TimeoutError:
            raise AssertionError("%s: the client browsed %s; proxy log:\n%s" % (
                what, sorted(last.get("v", {})), self.lab.log_text("gw-proxy", 60)))
        return last["v"]

    def get(self, path, router=0):
        """GET from a router's proxy's admin endpoint."""
        import urllib.request
        with L.netns(self.routers[router][0]):
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (PORT + 3000, path), timeout=5) as r:
                return r.read().decode()

    def unicast_ptr(self, name):
        """The PTR targets the proxy answers for `name` (a unicast client of the proxy)."""
        import dns.message
        import dns.query
        q = dns.message.make_query(name, "PTR")
        with L.netns(NS_GR):
            r = dns.query.udp(q, "127.0.0.1", port=PORT, timeout=3)
        return sorted(str(rr.target) for rrset in r.answer for rr in rrset)

    def stop(self):
        names = [p + n for _ns, p, _f, _c in self.routers for n in ("-proxy", "-avahi-r", "-dbus-r")]
        L.teardown(self.lab, names + ["gw-listener", "gw-avahi-c", "gw-avahi-f", "gw-dbus-c"],
                   [r[0] for r in self.routers] + [NS_GF, NS_GC] + ([NS_GK] if self.client_links > 1 else []))


@pytest.fixture(scope="module")
def gw(lab):
    g = GatewayLab(lab)
    try:
        g.start()
        g.start_proxy()
        yield g
    finally:
        g.stop()


def _wire_txt(strings):
    return b"".join(bytes([len(s)]) + s for s in strings)


def test_mdns_only_clients_find_the_far_printer_and_reach_it(gw, lab):
    """python-zeroconf and avahi (wide-area off) on the client link find Gw Printer with its
    port, its TXT byte-exact and its routable address, and a TCP connection to that address
    and port reaches the far listener through the router."""
    found = gw.wait_browse(lambda f: f.get("Gw Printer", {}).get("resolved"), "Gw Printer on the client link")
    printer = found["Gw Printer"]
    assert printer["port"] == 631
    assert printer["server"] == "gwfar-lab1.local.", printer
    assert printer["addresses"] == ["192.0.2.10"], printer
    # avahi publishes a static service's TXT strings in the file's order.
    assert bytes.fromhex(printer["txt"]) == _wire_txt(FAR_TXT), printer
    seen = gw.avahi_browse("_ipp._tcp")
    assert seen["Gw Printer"]["port"] == 631 and seen["Gw Printer"]["address"] == "192.0.2.10", seen
    with L.netns(NS_GC):
        with socket.create_connection((printer["addresses"][0], printer["port"]), timeout=5) as s:
            assert s.recv(64) == b"far printer\n"
    api = json.loads(gw.get("/api/services"))
    routes = [r for r in api["announcements"] if r["interface"] == "dgr-c"]
    assert routes and routes[0]["from"] == "lab1.example." and "Gw Printer._ipp._tcp" in routes[0]["instances"], api["announcements"]
    metrics = gw.get("/metrics")
    assert 'gateway_announced_instances{link="dgr-c"} 2' in metrics
    assert 'gateway_publish_errors_total{link="dgr-c"} 0' in metrics
    assert "Announced on dgr-c" in gw.get("/")
    # RFC 6763 §7.1: the named subtype is announced for the instances listed under it.
    universal = gw.browse("_universal._sub._ipp._tcp", seconds=3)
    assert any(name.startswith("Gw Printer.") for name in universal), universal
    assert not any(name.startswith("Shared Name") for name in universal), universal


def test_own_announcements_stay_out_of_the_client_links_unicast_answers(gw, lab):
    """The router's avahi-daemon sees what the proxy published on the client link like any
    responder's records; lab2.example.'s unicast answers list the client link's own Shared
    Name, never the announced far instances."""
    gw.wait_browse(lambda f: "Gw Printer" in f and "Shared Name (lab1)" in f, "the announcements on the client link")
    seen = {}

    def local_listed():
        seen["v"] = gw.unicast_ptr("_ipp._tcp.lab2.example.")
        return "Shared\\032Name._ipp._tcp.lab2.example." in seen["v"]
    try:
        L.wait_for(local_listed, 15, what="the client link's own Shared Name in lab2.example.")
    except TimeoutError:
        raise AssertionError("lab2.example. lists %s; proxy log:\n%s" % (seen.get("v"), lab.log_text("gw-proxy", 80)))
    time.sleep(2)
    assert gw.unicast_ptr("_ipp._tcp.lab2.example.") == ["Shared\\032Name._ipp._tcp.lab2.example."]
    assert "Gw\\032Printer._ipp._tcp.lab1.example." in gw.unicast_ptr("_ipp._tcp.lab1.example.")


def test_reload_withdraws_and_avahi_restart_keeps_announcing(gw, lab):
    gw.wait_browse(lambda f: "Gw Printer" in f, "Gw Printer on the client link")
    # avahi-daemon on the router restarts: the gateway answers for its records itself
    # (LinkResponder), and its far browses keep their records meanwhile (RFC 6762 §10): a
    # client that asks while the daemon is away still finds the printer, resolved.
    lab.stop_proc("gw-avahi-r")
    try:
        found = gw.browse(seconds=4)
        assert "Gw Printer" in found and found["Gw Printer"].get("port") == 631, found
    finally:
        lab.spawn_avahi(NS_GR, "gw-avahi-r", lab._avahi_conf("gw-router", ["dgr-f", "dgr-c"], True, publish=True),
                        (), gw.router_dbus("gw"))
    gw.wait_browse(lambda f: "Gw Printer" in f, "Gw Printer after avahi's restart", timeout=40)
    # A reload without the policy withdraws everything (goodbyes); with it, announces again.
    with open(gw.config) as f:
        text = f.read()
    with open(gw.config, "w") as f:
        f.write(text.replace("    announce:\n      - from: lab1.example.\n        services: {allow: [_ipp._tcp]}\n"
                             "        subtypes: [_universal._sub._ipp._tcp]\n", ""))
    L.kill_pid(lab.procs["gw-proxy"].pid, signal.SIGHUP)
    gw.wait_browse(lambda f: "Gw Printer" not in f and "Shared Name (lab1)" not in f, "withdrawn on reload", timeout=15)
    with open(gw.config, "w") as f:
        f.write(text)
    L.kill_pid(lab.procs["gw-proxy"].pid, signal.SIGHUP)
    gw.wait_browse(lambda f: "Gw Printer" in f, "announced again on reload")


def capture(lab, name, ns=NS_GC, iface="br-c"):
    """tcpdump of mDNS on a client link (link 1 unless told); stop() returns the parsed packets."""
    pcap = os.path.join(lab.dir, name + ".pcap")
    dump = subprocess.Popen(["ip", "netns", "exec", ns, "tcpdump", "-i", iface, "-n", "-U", "-w", pcap,
                             "udp", "port", "5353"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    time.sleep(1)  # tcpdump listening

    def stop():
        time.sleep(0.5)
        L.kill_pid(dump.pid, signal.SIGTERM)
        dump.wait(5)
        return L.dns_packets(pcap)
    return stop


def answered(packets):
    """Every owner name and RDATA text in the responses of a capture."""
    texts = set()
    for _ts, _src, _sp, _dst, _dp, msg in packets:
        if msg.flags & 0x8000:
            for rrset in msg.answer + msg.additional + msg.authority:
                texts.add(str(rrset.name))
                texts.update(rd.to_text() for rd in rrset)
    return texts


def test_a_type_not_allowed_never_appears(gw, lab):
    """Nothing of a denied type reaches the client link: not in a browse, and not in any
    response on the wire, from the proxy's start on (its first announcements included)."""
    gw.wait_browse(lambda f: "Gw Printer" in f, "Gw Printer on the client link")
    lab.stop_proc("gw-proxy")
    stop = capture(lab, "gw-denied")
    gw.start_proxy()
    gw.wait_browse(lambda f: "Gw Printer" in f, "Gw Printer announced again")
    assert gw.browse("_http._tcp", seconds=4) == {}
    assert "Gw Web" not in gw.avahi_browse("_http._tcp")
    packets = stop()
    texts = answered(packets)
    assert any("Gw\\032Printer" in t for t in texts), "the capture saw the allowed printer announced"
    # RFC 6762 §6: the responses carrying it, the gateway's announcements among them, leave port 5353.
    senders = {(src, sport) for _ts, src, sport, _dst, _dp, msg in packets
               if msg.flags & 0x8000 and "Gw\\032Printer" in str(msg)}
    assert ("198.51.100.1", 5353) in senders and all(sport == 5353 for _src, sport in senders), senders
    # RFC 6762 §10: 120 s for the records naming a host (SRV, A), 75 minutes for the rest.
    ttls = {}
    for _ts, src, _sp, _dst, _dp, msg in packets:
        if src == "198.51.100.1" and msg.flags & 0x8000:
            for rrset in msg.answer:
                if rrset.ttl and ("Gw\\032Printer" in str(rrset.name) or str(rrset.name).startswith("gwfar-lab1")):
                    ttls.setdefault(dns.rdatatype.to_text(rrset.rdtype), set()).add(rrset.ttl)
    assert ttls.get("SRV") == {120} and ttls.get("TXT") == {4500} and ttls.get("A") == {120}, ttls
    leaked = sorted(t for t in texts if "_http" in t or "Gw\\032Web" in t)
    assert not leaked, leaked


def test_a_client_link_the_acl_refuses_is_announced_nothing(gw, lab):
    """The gateway asks as a client of the client link (issue 25's trust rule): allow-clients
    that leaves the link's subnet out withdraws every announcement there on reload, and
    afterwards no response on the client link carries a far record, even to a client asking."""
    gw.wait_browse(lambda f: "Gw Printer" in f, "Gw Printer on the client link")
    with open(gw.config) as f:
        text = f.read()
    try:
        with open(gw.config, "w") as f:
            f.write(text + "allow-clients: [127.0.0.0/8, 192.0.2.0/24]\n")
        L.kill_pid(lab.procs["gw-proxy"].pid, signal.SIGHUP)
        gw.wait_browse(lambda f: "Gw Printer" not in f and "Shared Name (lab1)" not in f,
                       "withdrawn from the refused link", timeout=15)
        routes = json.loads(gw.get("/api/services"))["announcements"]
        assert all(not r["instances"] for r in routes), routes
        stop = capture(lab, "gw-refused")
        found = gw.browse(seconds=4)
        texts = answered(stop())
        assert "Gw Printer" not in found and "Shared Name (lab1)" not in found, sorted(found)
        leaked = sorted(t for t in texts if "Gw\\032Printer" in t or "lab1" in t or "gwfar" in t)
        assert not leaked, leaked
    finally:
        with open(gw.config, "w") as f:
            f.write(text)
        L.kill_pid(lab.procs["gw-proxy"].pid, signal.SIGHUP)
    gw.wait_browse(lambda f: "Gw Printer" in f, "announced again once allowed")


def test_a_name_taken_on_the_client_link_renames_the_far_instance_the_same_way_after_restart(gw, lab):
    """RFC 6762 §9: the client link's own Shared Name keeps its name and records; the far one
    is announced as "Shared Name (lab1)", again after a proxy restart."""
    def both(found):
        return "Shared Name (lab1)" in found and found.get("Shared Name", {}).get("port") == 9
    found = gw.wait_browse(both, "the local Shared Name and the renamed far one")
    assert found["Shared Name (lab1)"]["port"] == 632
    assert bytes.fromhex(found["Shared Name"]["txt"]) == _wire_txt([b"rp=local"])
    lab.stop_proc("gw-proxy")
    gw.wait_browse(lambda f: "Shared Name (lab1)" not in f and "Gw Printer" not in f,
                   "the announcements withdrawn at shutdown", timeout=15)
    gw.start_proxy()
    found = gw.wait_browse(both, "the same rename after a restart")
    assert found["Shared Name (lab1)"]["port"] == 632


def test_a_far_service_that_leaves_is_gone_from_the_client_within_3_s(gw, lab):
    gw.wait_browse(lambda f: "Gw Printer" in f, "Gw Printer on the client link")
    out = os.path.join(lab.dir, "gw-watch.log")
    with open(out, "w") as f:
        watch = subprocess.Popen(["ip", "netns", "exec", NS_GC, PY, os.path.join(HERE, "gateway_browser.py"),
                                  "198.51.100.10", "_ipp._tcp", "watch"], stdout=f, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    try:
        L.wait_for(lambda: "+ Gw Printer" in open(out).read(), 15, what="the watcher to see Gw Printer")
        # Drop Gw Printer from the far responder: avahi reloads its services on SIGHUP and
        # sends the goodbye.
        for name in os.listdir(gw.far_dir):
            path = os.path.join(gw.far_dir, name)
            if "Gw Printer" in open(path).read():
                os.remove(path)
        t0 = time.time()
        L.kill_pid(lab.procs["gw-avahi-f"].pid, signal.SIGHUP)
        L.wait_for(lambda: "- Gw Printer" in open(out).read(), 10, what="Gw Printer removed on the client")
        line = [x for x in open(out).read().splitlines() if x.startswith("- Gw Printer")][0]
        gone = float(line.split()[-1]) - t0
        print("far goodbye to removal on the client: %.2f s" % gone)
        assert gone <= 3.0, gone
    finally:
        L.kill_pid(watch.pid, signal.SIGTERM)
        watch.wait(5)
        lab.stop_proc("gw-avahi-f")
        gw.start_far_avahi()


LINK_LOCAL_ONLY = """\
import socket, time
from zeroconf import ServiceInfo, Zeroconf
zc = Zeroconf(interfaces=["192.0.2.10"])
zc.register_service(ServiceInfo("_ipp._tcp.local.", "LL Only._ipp._tcp.local.", port=631, server="llonly.local.",
                                addresses=[socket.inet_aton("169.254.7.7")], properties={b"rp": b"ll"}))
time.sleep(300)
"""


def test_a_far_device_with_link_local_addresses_only_is_reported_not_announced(gw, lab):
    """A device with link-local addresses only cannot be reached from another link (RFC 3927
    §2.6.2): it is not announced, and /api/services and the log say so and why."""
    gw.wait_browse(lambda f: "Gw Printer" in f, "Gw Printer on the client link")
    lab.spawn(NS_GF, [PY, "-c", LINK_LOCAL_ONLY], "gw-llonly")
    try:
        def held():
            for route in json.loads(gw.get("/api/services"))["announcements"]:
                for entry in route["heldBack"]:
                    if entry["instance"] == "LL Only._ipp._tcp":
                        return entry
        entry = L.wait_for(held, 30, interval=0.5, what="LL Only reported held back")
        assert entry["reason"].startswith("no routable address"), entry
        assert "LL Only" not in gw.browse()
        assert "a far instance is not announced" in lab.log_text("gw-proxy", 400)
        assert "Not announced: LL Only._ipp._tcp" in gw.get("/")
    finally:
        lab.stop_proc("gw-llonly")
