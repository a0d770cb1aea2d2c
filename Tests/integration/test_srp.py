"""SRP registrar and advertising proxy (issue 44; RFC 9665, RFC 9664,
draft-ietf-dnssd-advertising-proxy-06). A device on a client link registers with the router
(scripts/srp/srp_update.py: dnspython and cryptography, its SIG(0) cross-checked against BIND's
nsupdate in the unit tests); the registration is published over mDNS on that link (the client
link's avahi-daemon sees it), and a client on another link finds it over unicast DNS through
Unbound, with dig and dnssd-browse, and over DNS Push.

    NS_SC [dsc-r 203.0.113.10/24 2001:db8:c::10/64]   avahi-daemon (client), SRP requester
       |  veth (the client link: office.example.)
    NS_SR [dsr-c 203.0.113.1/24 2001:db8:c::1/64]    avahi-daemon (publishing on), own D-Bus,
          [dsr-f 198.51.100.1/24]                     proxy (srp.enabled) on both addresses
       |  veth (another link: far.example.)
    NS_SF [dsf-r 198.51.100.10/24]                    Unbound (stub-zone office.example. → proxy),
                                                      dig, dnssd-browse
"""

import os
import re
import signal
import subprocess
import sys
import time

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

import lab as L

NS_SR, NS_SC, NS_SF = L.NS_PREFIX + "sr", L.NS_PREFIX + "sc", L.NS_PREFIX + "sf"
PORT = 5340
ROUTER_C, ROUTER_F = "203.0.113.1", "198.51.100.1"
CLIENT, FAR = "203.0.113.10", "198.51.100.10"
OFFICE = "office.example."
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REQUESTER = os.path.join(REPO, "scripts", "srp", "srp_update.py")

CONFIG = """\
server-name: ns.example.
listen: ["%(rc)s:%(port)d", "%(rf)s:%(port)d"]
admin: "127.0.0.1:%(admin)d"
inventory-interval: 0
log-level: debug
links:
  - interface: dsr-c
    domain: office.example.
  - interface: dsr-f
    domain: far.example.
    announce:
      - from: office.example.
        services: {allow: [_ipp._tcp]}
push:
  listen: ["%(rf)s:%(push)d", "%(rc)s:%(push)d"]
  state-dir: "%(dir)s/srp-state"
srp:
  enabled: true
  store: "%(dir)s/srp-registrations.sqlite"
  lease-min: 30
%(srp)s
%(extra)s
"""

UNBOUND = """\
server:
  interface: %(far)s
  port: 53
  access-control: 0.0.0.0/0 allow
  do-not-query-localhost: no
  username: ""
  chroot: ""
  directory: "%(dir)s"
  pidfile: ""
  use-syslog: no
  logfile: ""
  module-config: "iterator"
  verbosity: 1
  cache-max-ttl: 5
  cache-max-negative-ttl: 1
stub-zone:
  name: "office.example."
  stub-addr: %(rf)s@%(port)d
"""


class SRPLab:
    def __init__(self, lab):
        self.lab = lab
        self.dbus_r = "unix:path=%s/srp-r-dbus.sock" % lab.dir
        self.dbus_c = "unix:path=%s/srp-c-dbus.sock" % lab.dir
        self.config = os.path.join(lab.dir, "srp.yaml")
        self.keys = os.path.join(lab.dir, "srp-keys")
        os.makedirs(self.keys, exist_ok=True)

    def start(self):
        for ns in (NS_SR, NS_SC, NS_SF):
            L.run(["ip", "netns", "add", ns])
            L.nsrun(ns, ["ip", "link", "set", "lo", "up"])
            L.nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0"])
            L.nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0"])
        L.run(["ip", "link", "add", "dsr-c", "netns", NS_SR, "type", "veth", "peer", "name", "dsc-r", "netns", NS_SC])
        L.run(["ip", "link", "add", "dsr-f", "netns", NS_SR, "type", "veth", "peer", "name", "dsf-r", "netns", NS_SF])
        for ns, ifn, v4, v6 in ((NS_SR, "dsr-c", ROUTER_C, "2001:db8:c::1"), (NS_SC, "dsc-r", CLIENT, "2001:db8:c::10"),
                                (NS_SR, "dsr-f", ROUTER_F, None), (NS_SF, "dsf-r", FAR, None)):
            L.nsrun(ns, ["ip", "addr", "add", v4 + "/24", "dev", ifn])
            if v6:
                L.nsrun(ns, ["ip", "-6", "addr", "add", v6 + "/64", "dev", ifn, "nodad"])
            L.nsrun(ns, ["ip", "link", "set", ifn, "multicast", "on", "up"])
        L.wait_for(lambda: "fe80" in L.nsrun(NS_SC, ["ip", "-6", "addr", "show", "dev", "dsc-r"]).stdout
                   and "tentative" not in L.nsrun(NS_SC, ["ip", "-6", "addr", "show", "dev", "dsc-r"]).stdout,
                   10, what="link-local address on dsc-r")
        self.lab.spawn_dbus(NS_SR, "srp-dbus-r", self.dbus_r)
        self.lab.spawn_dbus(NS_SC, "srp-dbus-c", self.dbus_c)
        self.lab.spawn_avahi(NS_SR, "srp-avahi-r", self.lab._avahi_conf("srp-router", ["dsr-c", "dsr-f"], True,
                                                                       publish=True), (), self.dbus_r)
        self.lab.wait_avahi_on_bus(NS_SR, "srp-avahi-r", self.dbus_r)
        # The client link's device: it holds the host name "lamp" (the name-conflict test).
        self.lab.spawn_avahi(NS_SC, "srp-avahi-c", self.lab._avahi_conf("lamp", ["dsc-r"], True, publish=True),
                             (), self.dbus_c)
        self.lab.wait_avahi_on_bus(NS_SC, "srp-avahi-c", self.dbus_c)
        with open(os.path.join(self.lab.dir, "srp-unbound.conf"), "w") as f:
            f.write(UNBOUND % {"far": FAR, "dir": self.lab.dir, "rf": ROUTER_F, "port": PORT})
        self.lab.spawn(NS_SF, ["unbound", "-d", "-c", os.path.join(self.lab.dir, "srp-unbound.conf")], "srp-unbound")

    def write_config(self, extra="", srp=""):
        with open(self.config, "w") as f:
            f.write(CONFIG % {"rc": ROUTER_C, "rf": ROUTER_F, "port": PORT, "admin": PORT + 3000,
                              "push": PORT + 1, "dir": self.lab.dir, "extra": extra, "srp": srp})

    def start_proxy(self, extra="", srp=""):
        self.write_config(extra, srp)
        proc = self.lab.spawn(NS_SR, [self.lab.proxy_bin(), "--config", self.config], "srp-proxy",
                              env_extra={"DBUS_SYSTEM_BUS_ADDRESS": self.dbus_r})

        def soa_ok():
            self.lab.check_alive("srp-proxy")
            with L.netns(NS_SR):
                return dns.query.udp(dns.message.make_query(OFFICE, "SOA"), ROUTER_C, port=PORT, timeout=1).answer
        L.wait_for(soa_ok, 30, interval=0.3, what="the proxy to answer")
        return proc

    def stop_proxy(self):
        self.lab.stop_proc("srp-proxy")

    def register(self, host, *, key="a", instance=None, service="_ipp._tcp", port=631, txt=("rp=ipp/print",),
                 address=(), lease=7200, key_lease=1209600, tcp=False, tls=False, remove=False, subtype=(),
                 zone=None, expect=None):
        """Runs the requester on the client link; returns (RCODE text, lease option hex)."""
        cmd = [sys.executable, REQUESTER, "--host", host, "--key-file", os.path.join(self.keys, key + ".pem"),
               "--server", ROUTER_C, "--server-port", str(PORT + 1 if tls else PORT), "--lease", str(lease),
               "--key-lease", str(key_lease), "--port", str(port)]
        if instance:
            cmd += ["--service", service, "--instance", instance]
        for t in txt:
            cmd += ["--txt", t]
        for a in address or (CLIENT,):
            cmd += ["--address", a]
        for s in subtype:
            cmd += ["--subtype", s]
        if zone:
            cmd += ["--zone", zone]
        if tcp:
            cmd.append("--tcp")
        if tls:
            cmd.append("--tls")
        if remove:
            cmd.append("--remove")
        r = L.nsrun(NS_SC, cmd, check=False, timeout=20)
        assert r.returncode == 0, r.stdout + r.stderr
        rcode, option = r.stdout.split()
        if expect is not None:
            assert rcode == expect, "%s: %s, want %s; proxy log:\n%s" % (host, rcode, expect,
                                                                         self.lab.log_text("srp-proxy", 30))
        return rcode, option

    def avahi_browse(self, stype="_ipp._tcp"):
        """What `avahi-browse -r` on the client link resolves: {name: (host, port, txt)}."""
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.dbus_c)
        r = L.nsrun(NS_SC, ["avahi-browse", "-r", "-t", "-p", stype], check=False, env=env, timeout=20)
        found = {}
        for line in r.stdout.splitlines():
            f = line.split(";")
            if f[0] == "=" and len(f) >= 10 and f[2] == "IPv4":
                found[L.avahi_unescape(f[3])] = (f[6], int(f[8]), f[9])
        return found

    def resolver(self, name, rdtype, tcp=False):
        q = dns.message.make_query(name, rdtype)
        with L.netns(NS_SF):
            return (dns.query.tcp if tcp else dns.query.udp)(q, FAR, port=53, timeout=5)

    def dig(self, name, rdtype):
        r = L.nsrun(NS_SF, ["dig", "+time=4", "+tries=1", "@" + FAR, name, rdtype, "+short"],
                    check=False)
        return r.stdout.split("\n")

    def stop(self):
        L.teardown(self.lab, ("srp-proxy", "srp-unbound", "srp-avahi-c", "srp-avahi-r", "srp-dbus-c",
                              "srp-dbus-r"), (NS_SR, NS_SC, NS_SF))


@pytest.fixture(scope="module")
def srp(lab):
    s = SRPLab(lab)
    try:
        s.start()
        s.start_proxy()
        yield s
    finally:
        s.stop()


def _wait(pred, timeout, what, srp):
    try:
        L.wait_for(pred, timeout, interval=0.5, what=what)
    except TimeoutError:
        raise AssertionError("%s; proxy log:\n%s\nunbound log:\n%s" % (
            what, srp.lab.log_text("srp-proxy", 40), srp.lab.log_text("srp-unbound", 20)))


def test_register_over_udp_seen_over_mdns_and_through_a_resolver(srp, lab):
    """RFC 9665 §3.3, RFC 9664 §4: NOERROR with the granted leases (KEY-LEASE capped at 7
    days); the service on its own link over mDNS (avahi-browse), and from another link in the
    link's zone through Unbound (dig), TXT byte for byte."""
    t0 = time.monotonic()
    rcode, option = srp.register("printer", instance="Printer 1", subtype=("_universal",),
                                 txt=("rp=ipp/print", "ty=Lab"), address=(CLIENT, "2001:db8:c::10"))
    answered = time.monotonic() - t0
    assert rcode == "NOERROR", lab.log_text("srp-proxy", 40)
    assert option == "00001c2000093a80", option  # LEASE 7200, KEY-LEASE 604800
    assert answered < 3.0, "the answer waited %.1f s" % answered
    _wait(lambda: "Printer 1" in srp.avahi_browse(), 20, "Printer 1 over mDNS on the client link", srp)
    host, port, txt = srp.avahi_browse()["Printer 1"]
    assert host == "printer.local" and port == 631, (host, port)
    assert '"ty=Lab"' in txt and '"rp=ipp/print"' in txt, txt
    # Unicast, through the resolver, from the other link.
    _wait(lambda: any("Printer" in line for line in srp.dig("_ipp._tcp." + OFFICE, "PTR")), 20,
          "the PTR through Unbound", srp)
    instance = "Printer\\0321._ipp._tcp." + OFFICE
    srv = srp.resolver(instance, "SRV")
    assert srv.rcode() == dns.rcode.NOERROR and srv.answer, srv
    assert "631 printer.office.example." in srv.answer[0].to_text(), srv.answer
    txt = srp.resolver(instance, "TXT")
    assert txt.answer and list(txt.answer[0][0].strings) == [b"rp=ipp/print", b"ty=Lab"], txt.answer
    a = srp.resolver("printer." + OFFICE, "A")
    assert a.answer and a.answer[0][0].address == CLIENT, a
    subtype = srp.dig("_universal._sub._ipp._tcp." + OFFICE, "PTR")
    assert any("Printer" in line for line in subtype), subtype


def test_register_over_tcp_and_browse_with_dnssd_browse(srp, lab):
    # Two AAAA: an RRset of two records, which avahi-daemon publishes shared (the A is probed).
    srp.register("scanner", key="b", instance="Scanner", service="_uscan._tcp", port=8080, tcp=True,
                 address=(CLIENT, "2001:db8:c::20", "2001:db8:c::21"), expect="NOERROR")
    binary = os.environ.get("DNSSD_BROWSE_BIN", os.path.join(REPO, ".build/debug/dnssd-browse"))
    if not os.path.exists(binary):
        pytest.skip("no dnssd-browse binary")

    def found():
        r = L.nsrun(NS_SF, [binary, "--server", FAR, "--resolve", "Scanner", "_uscan._tcp", OFFICE],
                    check=False, timeout=20)
        return r.returncode == 0 and "8080" in r.stdout and "scanner.office.example" in r.stdout
    _wait(found, 20, "dnssd-browse --resolve Scanner through Unbound", srp)
    _wait(lambda: len(srp.resolver("scanner." + OFFICE, "AAAA").answer[0]) == 2
          if srp.resolver("scanner." + OFFICE, "AAAA").answer else False, 15, "scanner's two AAAA", srp)


def test_register_over_dns_over_tls(srp, lab):
    """The DNS Push listener (RFC 7858 framing) takes updates too."""
    srp.register("secure", key="q", instance="Secure", tls=True, expect="NOERROR")
    _wait(lambda: "Secure" in srp.avahi_browse(), 20, "Secure over mDNS", srp)


def test_another_key_for_a_held_name_is_yxdomain(srp, lab):
    """§3.3.3: first come, first served by KEY; the holder's registration is untouched."""
    srp.register("holder", key="c", instance="Holder", expect="NOERROR")
    srp.register("holder", key="d", instance="Holder", address=("203.0.113.99",), expect="YXDOMAIN")
    _wait(lambda: srp.resolver("holder." + OFFICE, "A").answer, 15, "holder's A", srp)
    a = srp.resolver("holder." + OFFICE, "A")
    assert a.answer[0][0].address == CLIENT, a.answer


def test_refused_updates_change_nothing(srp, lab):
    """No Update Lease option (nsupdate's kind of update), a changed octet (the signature), a
    name of another link's zone: REFUSED, nothing published."""
    srp.register("nolease", key="e", instance="No Lease", lease=-1, expect="REFUSED")
    srp.register("otherzone", key="e", instance="Other Zone", zone="far.example.", expect="REFUSED")
    # A signed update with one octet changed (the last of the signature).
    r = L.nsrun(NS_SC, [sys.executable, REQUESTER, "--host", "badsig", "--key-file", os.path.join(srp.keys, "e.pem"),
                        "--address", CLIENT, "--service", "_ipp._tcp", "--instance", "Bad Sig", "--hex"])
    wire = bytearray.fromhex(r.stdout.strip())
    wire[-1] ^= 1
    reply = _raw_udp(bytes(wire))
    assert dns.rcode.to_text(reply.rcode()) == "REFUSED", reply
    time.sleep(2)
    names = srp.avahi_browse()
    assert not {"No Lease", "Other Zone", "Bad Sig"} & set(names), names


def _raw_udp(wire):
    import socket
    with L.netns(NS_SC):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(5)
            s.sendto(wire, (ROUTER_C, PORT))
            data, _ = s.recvfrom(65535)
    return dns.message.from_wire(data)


def test_a_name_a_device_holds_on_the_link_is_yxdomain(srp, lab):
    """The client link's avahi-daemon is host "lamp": a registration of lamp is probed for by
    the registrar's responder (RFC 6762 §8.1), collides, and gets YXDOMAIN; the device keeps
    its name."""
    rcode, _ = srp.register("lamp", key="f", instance="Lamp", address=("203.0.113.77",))
    assert rcode == "YXDOMAIN", lab.log_text("srp-proxy", 40)
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=srp.dbus_c)
    r = L.nsrun(NS_SC, ["avahi-resolve-host-name", "-4", "lamp.local"], check=False, env=env, timeout=15)
    assert CLIENT in r.stdout, r.stdout + r.stderr
    assert "Host name conflict" not in lab.log_text("srp-avahi-c", 200)


def test_lease_zero_removes_at_once_with_goodbyes(srp, lab):
    srp.register("temp", key="g", instance="Temp", expect="NOERROR")
    _wait(lambda: "Temp" in srp.avahi_browse(), 20, "Temp over mDNS", srp)
    t0 = time.monotonic()
    srp.register("temp", key="g", instance="Temp", lease=0, key_lease=0, remove=True, expect="NOERROR")
    # avahi-browse without -t would show the removal; a fresh browse no longer finds it
    # within a second or two of the goodbye (its cache entry is gone, RFC 6762 §10.1).
    _wait(lambda: "Temp" not in srp.avahi_browse(), 10, "Temp withdrawn", srp)
    assert time.monotonic() - t0 < 15


def test_a_30_second_lease_expires_on_time(srp, lab):
    srp.register("brief", key="h", instance="Brief", lease=30, key_lease=60, expect="NOERROR")
    t0 = time.monotonic()
    _wait(lambda: "Brief" in srp.avahi_browse(), 20, "Brief over mDNS", srp)
    _wait(lambda: "Brief" not in srp.avahi_browse(), 45, "Brief expired", srp)
    elapsed = time.monotonic() - t0
    assert 25 <= elapsed <= 45, elapsed
    assert "SRP registration expired" in lab.log_text("srp-proxy", 400)


def test_kill_9_after_noerror_loses_nothing(srp, lab):
    """Stored before NOERROR (SQLite, synchronous=FULL): kill -9 right after the answer, start
    again, and the registration is back, its lease still counting, the other key still refused."""
    srp.register("durable", key="i", instance="Durable", expect="NOERROR")
    proc = lab.procs["srp-proxy"]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(5)
    lab.procs.pop("srp-proxy", None)
    srp.start_proxy()
    _wait(lambda: "Durable" in srp.avahi_browse(), 20, "Durable back over mDNS after kill -9", srp)
    assert "SRP registrar on" in lab.log_text("srp-proxy", 400)
    srp.register("durable", key="j", instance="Durable", address=("203.0.113.98",), expect="YXDOMAIN")


def test_a_client_outside_allow_clients_is_refused(srp, lab):
    srp.stop_proxy()
    srp.start_proxy('allow-clients: ["198.51.100.0/24", "203.0.113.1/32"]')
    try:
        srp.register("outsider", key="k", instance="Outsider", expect="REFUSED")
    finally:
        srp.stop_proxy()
        srp.start_proxy()


def test_the_registrar_is_advertised_on_its_links(srp, lab):
    """RFC 9665 §10: _dnssd-srp._tcp at the DNS port, _dnssd-srp-tls._tcp at the TLS port."""
    _wait(lambda: srp.avahi_browse("_dnssd-srp._tcp"), 20, "_dnssd-srp._tcp on the client link", srp)
    (name, (host, port, _txt)), = srp.avahi_browse("_dnssd-srp._tcp").items()
    assert (name, host, port) == ("ns", "ns-srp.local", PORT), (name, host, port)
    tls = srp.avahi_browse("_dnssd-srp-tls._tcp")
    assert [(h, p) for h, p, _ in tls.values()] == [("ns-srp.local", PORT + 1)], tls


def test_status_api_lists_registrations(srp, lab):
    import json
    import urllib.request
    srp.register("listed", key="l", instance="Listed", expect="NOERROR")
    with L.netns(NS_SR):
        data = json.load(urllib.request.urlopen("http://127.0.0.1:%d/api/services" % (PORT + 3000), timeout=5))
        page = urllib.request.urlopen("http://127.0.0.1:%d/" % (PORT + 3000), timeout=5).read().decode()
    registrar = data["registrar"]
    assert registrar["enabled"] is True and registrar["updates"].get("NOERROR", 0) >= 1, registrar["updates"]
    host = next(h for h in registrar["hosts"] if h["host"] == "listed." + OFFICE)
    assert host["link"] == "dsr-c" and host["source"] == CLIENT, host
    assert 7100 < host["leaseLeft"] <= 7200 and host["keyLeaseLeft"] > 600000, host
    assert host["instances"] == ["Listed._ipp._tcp"] and host["keyTag"] > 0, host
    assert "Registered (SRP)" in page and "listed.office.example." in page


def test_a_registration_reaches_a_dns_push_subscriber(srp, lab):
    """RFC 8765 through the resolver's discovery (_dns-push-tls._tcp SRV): a dnssd-browse --watch
    on the other link sees a registration appear as it is made."""
    binary = os.environ.get("DNSSD_BROWSE_BIN", os.path.join(REPO, ".build/debug/dnssd-browse"))
    if not os.path.exists(binary):
        pytest.skip("no dnssd-browse binary")
    out = os.path.join(lab.dir, "srp-push-watch.out")
    with open(out, "w") as f:
        watch = subprocess.Popen(["ip", "netns", "exec", NS_SF, binary, "--server", FAR, "--watch", "--push-insecure",
                                  "--duration", "25", "_printer._tcp", OFFICE], stdout=f, stderr=subprocess.STDOUT)
    try:
        time.sleep(3)
        srp.register("pusher", key="m", instance="Pushed", service="_printer._tcp", port=515, expect="NOERROR")

        def seen():
            with open(out) as f:
                return any(line.startswith("+") and "Pushed" in line for line in f)
        _wait(seen, 15, "the registration as a DNS Push change", srp)
        with open(out) as f:
            text = f.read()
        assert "polling" not in text.lower(), text
    finally:
        watch.kill()
        watch.wait(5)


def test_hosts_per_client_are_bounded(srp, lab):
    """srp.max-hosts-per-client: a new host over the bound is REFUSED (counted by its limit);
    a host already registered from that address still renews."""
    srp.register("bounded", key="n", instance="Bounded", expect="NOERROR")
    srp.stop_proxy()
    srp.start_proxy(srp="  max-hosts-per-client: 1")
    try:
        srp.register("onemore", key="o", instance="One More", expect="REFUSED")
        srp.register("bounded", key="n", instance="Bounded", expect="NOERROR")
        import urllib.request
        with L.netns(NS_SR):
            metrics = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % (PORT + 3000), timeout=5).read().decode()
        assert re.search(r'^srp_limited_total\{limit="max-hosts-per-client"\} 1$', metrics, re.M), \
            [line for line in metrics.splitlines() if line.startswith("srp_")]
    finally:
        srp.stop_proxy()
        srp.start_proxy()


ZEROCONF_BROWSE = """
import sys, time
from zeroconf import ServiceBrowser, Zeroconf
want = sys.argv[2]
found = []
zc = Zeroconf(interfaces=[sys.argv[1]])
class Listener:
    def add_service(self, zc, type_, name):
        found.append(name)
    def update_service(self, zc, type_, name):
        pass
    def remove_service(self, zc, type_, name):
        pass
ServiceBrowser(zc, "_ipp._tcp.local.", Listener())
deadline = time.monotonic() + float(sys.argv[3])
while time.monotonic() < deadline and not any(n.startswith(want) for n in found):
    time.sleep(0.2)
info = zc.get_service_info("_ipp._tcp.local.", want + "._ipp._tcp.local.", timeout=3000) if any(
    n.startswith(want) for n in found) else None
print("FOUND" if info else "MISSING", info.port if info else "", sorted(found))
zc.close()
"""


def test_the_gateway_carries_a_registration_to_another_link(srp, lab):
    """links[].announce on the far link (from office.example., _ipp._tcp): a registered service
    is announced there over mDNS like any other of the client link (python-zeroconf on the far
    link resolves it)."""
    srp.register("carried", key="p", instance="Carried", port=9631, expect="NOERROR")
    r = L.nsrun(NS_SF, [sys.executable, "-c", ZEROCONF_BROWSE, FAR, "Carried", "25"], check=False, timeout=60)
    assert r.stdout.startswith("FOUND 9631"), r.stdout + r.stderr + lab.log_text("srp-proxy", 30)


def test_a_frozen_avahi_daemon_delays_no_answer_and_loses_nothing(srp, lab):
    """The router's avahi-daemon stopped (SIGSTOP): registrations do not go through it (the
    registrar probes and announces with its own responder), so the answer comes after the
    probe, NOERROR, and the service is on the link while the daemon is still stopped."""
    pid = lab.procs["srp-avahi-r"].pid
    # The daemon is the shell's child (avahi-daemon runs under `sh -c ... exec`: the same pid).
    os.kill(pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        srp.register("frozen", key="r", instance="Frozen", expect="NOERROR")
        assert time.monotonic() - t0 < 4, time.monotonic() - t0
        # Answered on the probe's outcome (RFC 6762 §8.1: about a second), not the 1.3 s wait.
        assert "not confirmed in time" not in lab.log_text("srp-proxy", 400)
        # Queries go on meanwhile (the registrar's thread and lock are its own).
        with L.netns(NS_SR):
            assert dns.query.udp(dns.message.make_query(OFFICE, "SOA"), ROUTER_C, port=PORT, timeout=2).answer
        _wait(lambda: "Frozen" in srp.avahi_browse(), 20, "Frozen on the link, the router's avahi-daemon stopped", srp)
    finally:
        os.kill(pid, signal.SIGCONT)
