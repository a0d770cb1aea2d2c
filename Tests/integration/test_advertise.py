"""Zero-configuration browse domains (issue 16): with `advertise-browse-domains: [IFACE]` the
proxy publishes `b._dns-sd._udp.local.` and `lb._dns-sd._udp.local.` PTRs on that interface
through the router's avahi-daemon (RFC 6763 §11), naming the link zones its clients may see,
so a client on that link finds them with `avahi-browse -D` and no DHCP option. Withdrawn on
reload and on shutdown (mDNS goodbyes, RFC 6762 §10.1).

A small topology of its own, beside the session lab::

    NS_AC [dpc-a 203.0.113.10/24 2001:db8:a::10/64]  avahi-daemon (client, own D-Bus)
       |  veth (the client link)
    NS_AR [dpa-c 203.0.113.1/24 2001:db8:a::1/64]   avahi-daemon (publishing on), own D-Bus,
          [dpa-p 198.51.100.1/24]                    proxy on 127.0.0.1:5310
          [dpa-s 192.0.2.1/24]      

Links: dpa-c = office.example. (visible to all), dpa-p = printers.example. (visible to all),
dpa-s = staff.example. (links[].clients 192.0.2.0/24 only: never advertised to 203.0.113.0/24).
"""

import os
import signal
import time

import pytest

import lab as L

NS_AR, NS_AC = L.NS_PREFIX + "ar", L.NS_PREFIX + "ac"
PORT = 5310
OFFICE, PRINTERS, STAFF = "office.example", "printers.example", "staff.example"

CONFIG = """\
server-name: ns.example.
listen: ["127.0.0.1:%(port)d"]
admin: "127.0.0.1:%(admin)d"
inventory-interval: 0
log-level: debug
links:
  - interface: dpa-c
    domain: office.example.
  - interface: dpa-p
    domain: printers.example.
  - interface: dpa-s
    domain: staff.example.
    clients: ["192.0.2.0/24"]
%(extra)s
"""


def _config(lab, extra):
    path = os.path.join(lab.dir, "advertise.yaml")
    with open(path, "w") as f:
        f.write(CONFIG % {"port": PORT, "admin": PORT + 3000, "extra": extra})
    return path


class AdvertiseLab:
    def __init__(self, lab):
        self.lab = lab
        self.dbus_r = "unix:path=%s/adv-r-dbus.sock" % lab.dir
        self.dbus_c = "unix:path=%s/adv-c-dbus.sock" % lab.dir

    def start(self):
        for ns in (NS_AR, NS_AC):
            L.run(["ip", "netns", "add", ns])
            L.nsrun(ns, ["ip", "link", "set", "lo", "up"])
            L.nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.all.accept_dad=0"])
            L.nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.default.accept_dad=0"])
        L.run(["ip", "link", "add", "dpa-c", "netns", NS_AR, "type", "veth", "peer", "name", "dpc-a", "netns", NS_AC])
        for ns, ifn, v4, v6 in ((NS_AR, "dpa-c", "203.0.113.1", "2001:db8:a::1"),
                                (NS_AC, "dpc-a", "203.0.113.10", "2001:db8:a::10")):
            L.nsrun(ns, ["ip", "addr", "add", v4 + "/24", "dev", ifn])
            L.nsrun(ns, ["ip", "-6", "addr", "add", v6 + "/64", "dev", ifn, "nodad"])
            L.nsrun(ns, ["ip", "link", "set", ifn, "multicast", "on", "up"])
        for ifn, v4 in (("dpa-p", "198.51.100.1"), ("dpa-s", "192.0.2.1")):
            # (no dummy driver on every kernel: a veth pair with both ends here)
            L.nsrun(NS_AR, ["ip", "link", "add", ifn, "type", "veth", "peer", "name", ifn + "x"])
            L.nsrun(NS_AR, ["ip", "addr", "add", v4 + "/24", "dev", ifn])
            L.nsrun(NS_AR, ["ip", "link", "set", ifn, "up"])
        L.wait_for(lambda: "tentative" not in L.nsrun(NS_AC, ["ip", "-6", "addr", "show", "dev", "dpc-a"]).stdout
                   and "fe80" in L.nsrun(NS_AC, ["ip", "-6", "addr", "show", "dev", "dpc-a"]).stdout,
                   10, what="link-local address on dpc-a")
        self.lab.spawn_dbus(NS_AR, "adv-dbus-r", self.dbus_r)
        self.lab.spawn_dbus(NS_AC, "adv-dbus-c", self.dbus_c)
        self.start_router_avahi(publish=True)
        self.lab.spawn_avahi(NS_AC, "adv-avahi-c",
                             self.lab._avahi_conf("adv-client", ["dpc-a"], True, publish=False), (), self.dbus_c)
        self.lab.wait_avahi_on_bus(NS_AC, "adv-avahi-c", self.dbus_c)

    def start_router_avahi(self, publish):
        conf = self.lab._avahi_conf("adv-router", ["dpa-c"], True, publish=True)
        if not publish:
            conf = conf.replace("[publish]", "[publish]\ndisable-publishing=yes")
        self.lab.spawn_avahi(NS_AR, "adv-avahi-r", conf, (), self.dbus_r)
        self.lab.wait_avahi_on_bus(NS_AR, "adv-avahi-r", self.dbus_r)

    def start_proxy(self, extra):
        path = _config(self.lab, extra)
        cmd = [self.lab.proxy_bin(), "--config", path]
        proc = self.lab.spawn(NS_AR, cmd, "adv-proxy", env_extra={"DBUS_SYSTEM_BUS_ADDRESS": self.dbus_r})

        def soa_ok():
            self.lab.check_alive("adv-proxy")
            import dns.message
            import dns.query
            q = dns.message.make_query(OFFICE + ".", "SOA")
            with L.netns(NS_AR):
                return dns.query.udp(q, "127.0.0.1", port=PORT, timeout=1).answer
        L.wait_for(soa_ok, 30, interval=0.3, what="the advertising proxy to answer")
        return proc, path

    def browse_domains(self):
        """`avahi-browse -D` on the client link: {(protocol, domain)} found by mDNS."""
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.dbus_c)
        r = L.nsrun(NS_AC, ["avahi-browse", "-D", "-t", "-p"], check=False, env=env, timeout=15)
        found = set()
        for line in r.stdout.splitlines():
            f = line.split(";")
            if f[0] == "+" and len(f) >= 4:
                found.add((f[2], L.avahi_unescape(f[3]).rstrip(".")))
        return found

    def domains(self):
        return {d for _p, d in self.browse_domains()}

    def wait_domains(self, want, timeout=20):
        last = {}

        def ok():
            last["v"] = self.domains()
            return last["v"] == want
        try:
            L.wait_for(ok, timeout, interval=1.0, what="browse domains %s" % sorted(want))
        except TimeoutError:
            raise AssertionError("avahi-browse -D on the client link found %s, want %s; proxy log:\n%s" % (
                sorted(last.get("v", ())), sorted(want), self.lab.log_text("adv-proxy", 40)))

    def stop(self):
        L.teardown(self.lab, ("adv-proxy", "adv-avahi-c", "adv-avahi-r", "adv-dbus-c", "adv-dbus-r"), (NS_AR, NS_AC))


@pytest.fixture(scope="module")
def adv(lab):
    a = AdvertiseLab(lab)
    try:
        a.start()
        yield a
    finally:
        a.stop()


def test_check_config_shows_what_each_interface_gets(adv, lab):
    path = _config(lab, "advertise-browse-domains: [dpa-c]")
    r = L.nsrun(NS_AR, [lab.proxy_bin(), "--config", path, "--check-config"], check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "  - dpa-c  # office.example., printers.example." in r.stdout, r.stdout
    bad = _config(lab, "advertise-browse-domains: [dpa-c, nosuch0]")
    r = L.nsrun(NS_AR, [lab.proxy_bin(), "--config", bad, "--check-config"], check=False)
    assert r.returncode == 2
    assert 'advertise-browse-domains[1]: "nosuch0": no such network interface' in r.stderr, r.stderr


def test_publishing_disabled_is_named_then_recovers_when_avahi_restarts(adv, lab):
    """avahi-daemon with disable-publishing=yes refuses the records: the log says which
    setting; once the daemon runs with publishing on, the PTRs appear without a proxy restart
    (AVAHI_CLIENT_NO_FAIL reconnect)."""
    lab.stop_proc("adv-avahi-r")
    adv.start_router_avahi(publish=False)
    proc, _ = adv.start_proxy("advertise-browse-domains: [dpa-c]")
    try:
        L.wait_for(lambda: "disable-publishing=yes" in lab.log_text("adv-proxy", 400), 15,
                   what="the proxy to name disable-publishing")
        assert adv.domains() == set()
        lab.stop_proc("adv-avahi-r")
        adv.start_router_avahi(publish=True)
        adv.wait_domains({OFFICE, PRINTERS}, timeout=30)
    finally:
        lab.stop_proc("adv-proxy")


def test_client_finds_the_zones_it_may_see_then_reload_and_shutdown_withdraw_them(adv, lab):
    """RFC 6763 §11: b/lb PTRs on the client link; staff.example. is not visible to
    203.0.113.0/24 (links[].clients) and is never named there."""
    proc, path = adv.start_proxy("advertise-browse-domains: [dpa-c]")
    try:
        adv.wait_domains({OFFICE, PRINTERS})
        found = adv.browse_domains()
        assert ("IPv4", OFFICE) in found and ("IPv6", OFFICE) in found, found
        # Reload: printers.example. now has a view that leaves the client out.
        with open(path) as f:
            text = f.read()
        text = text.replace("    domain: printers.example.\n",
                            "    domain: printers.example.\n    clients: [\"198.51.100.0/24\"]\n")
        with open(path, "w") as f:
            f.write(text)
        os.kill(proc.pid, signal.SIGHUP)
        adv.wait_domains({OFFICE})
        # Reload without the key: nothing advertised.
        with open(path, "w") as f:
            f.write(text.replace("advertise-browse-domains: [dpa-c]", ""))
        os.kill(proc.pid, signal.SIGHUP)
        adv.wait_domains(set())
        with open(path, "w") as f:
            f.write(text)
        os.kill(proc.pid, signal.SIGHUP)
        adv.wait_domains({OFFICE})
        t0 = time.monotonic()
        lab.stop_proc("adv-proxy")
        adv.wait_domains(set(), timeout=10)
        print("withdrawn %.1f s after SIGTERM" % (time.monotonic() - t0))
    finally:
        lab.stop_proc("adv-proxy")
