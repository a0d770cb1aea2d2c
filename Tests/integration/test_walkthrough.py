"""docs/SMALL-OFFICE.md, run: the office router's dnsmasq (deploy/small-office/dnsmasq.conf,
verbatim but for the interface names) on port 53 of the LANs, the proxy on 127.0.0.1:5300,
and a laptop on LAN 1 (the far side of link 1) whose resolv.conf names the router and the
office's search domain, as DHCP would give it. The laptop finds the browse domains, lists
LAN 2's printers and resolves one, with dig and dnssd-browse; and the troubleshooting
table's first row (REFUSED from the proxy means its client ACL) is checked.
DPT_WALKTHROUGH_OUT=FILE writes every command and its output there (the document's source)."""

import os
import subprocess
import time

import pytest

import avahi_client as AC
import lab as L
from test_cli_browse import cli_bin

CONF = os.path.join(L.REPO, "deploy", "small-office", "dnsmasq.conf")
ROUTER = L.R_V4_1           # 192.0.2.1: the router on LAN 1
ETC = "/etc/netns/%s" % L.NS_L1
OUT = os.environ.get("DPT_WALKTHROUGH_OUT")


@pytest.fixture(scope="module")
def office(lab):
    text = open(CONF).read().replace("interface=eth1", "interface=" + L.R_IF1) \
        .replace("interface=eth2", "interface=" + L.R_IF2)
    path = os.path.join(lab.dir, "office-dnsmasq.conf")
    with open(path, "w") as f:
        f.write(text + "\nno-resolv\npid-file=\nlog-facility=-\nlog-queries\nport=53\n")
    check = L.nsrun(L.NS_R, ["dnsmasq", "--test", "-C", path], check=False)
    assert check.returncode == 0, check.stderr
    lab.spawn(L.NS_R, ["dnsmasq", "-k", "-C", path], "dnsmasq-office")
    os.makedirs(ETC, exist_ok=True)
    with open(os.path.join(ETC, "resolv.conf"), "w") as f:
        f.write("nameserver %s\nsearch example\n" % ROUTER)
    L.wait_for(lambda: _laptop(["dig", "+short", "+time=1", "+tries=1", "lab1.example.", "SOA"]).strip() != "",
               20, what="dnsmasq on the router to forward to the proxy")
    if OUT:
        open(OUT, "w").close()
    yield
    lab.stop_proc("dnsmasq-office")
    os.unlink(os.path.join(ETC, "resolv.conf"))


def _laptop(cmd, check=False):
    """Runs `cmd` on the laptop (LAN 1), with its resolv.conf; returns stdout (and records it)."""
    p = subprocess.run(["ip", "netns", "exec", L.NS_L1] + cmd, capture_output=True, text=True, timeout=60)
    if OUT:
        shown = [os.path.basename(cmd[0])] + cmd[1:]
        with open(OUT, "a") as f:
            f.write("$ %s\n%s%s\n" % (" ".join(shown), p.stdout, p.stderr))
    if check:
        assert p.returncode == 0, p.stderr
    return p.stdout


def _until(cmd, want, timeout=15):
    deadline = time.monotonic() + timeout
    while True:
        out = _laptop(cmd)
        if want in out or time.monotonic() > deadline:
            return out
        time.sleep(1)


def test_router_asks_the_proxy_directly(office):
    """Step 1's check on the router: the proxy on its loopback port browses LAN 2."""
    cmd = ["dig", "@127.0.0.1", "-p", str(L.PROXY_PORT), "+short", "_ipp._tcp.lab2.example.", "PTR"]
    out = L.nsrun(L.NS_R, cmd).stdout
    _record(" ".join(cmd), subprocess.CompletedProcess(cmd, 0, out, ""))
    assert out.strip() == "Printer\\032Two._ipp._tcp.lab2.example.", out


def test_laptop_finds_the_browse_domains(office):
    out = _laptop(["dig", "+short", "lb._dns-sd._udp.example.", "PTR"])
    assert set(out.split()) == {"lab1.example.", "lab2.example."}, out
    out = _laptop([cli_bin(), "--domains"], check=True)
    assert "lab1.example." in out and "lab2.example." in out, out


def test_laptop_browses_and_resolves_lan2(office):
    out = _until(["dig", "+short", "_ipp._tcp.lab2.example.", "PTR"], "Printer\\032Two")
    assert "Printer\\032Two._ipp._tcp.lab2.example." in out, out
    out = _until([cli_bin(), "_ipp._tcp", "lab2.example."], "Printer Two")
    assert "Printer Two" in out, out
    out = _laptop([cli_bin(), "--resolve", "Printer Two", "_ipp._tcp", "lab2.example."], check=True)
    assert "farhost2.lab2.example." in out and "631" in out and L.L2_V4 in out, out
    out = _laptop([cli_bin(), "--types", "lab2.example."], check=True)
    assert "_ipp._tcp" in out, out


@pytest.fixture(scope="module")
def linux_laptop(lab, office):
    """avahi-daemon with wide-area browsing on the laptop (avahi_client.py has the settings;
    it reads the router from resolv.conf)."""
    client = AC.AvahiClient(lab, L.NS_L1, name="avahi-laptop", allow_interfaces=[L.L1_IF])
    client.start()
    yield client
    client.stop()


def test_linux_laptop_with_avahi(linux_laptop):
    """`avahi-browse -D -d example` lists the browse domains (through the search domain's
    b._dns-sd._udp PTR), and `avahi-browse -r -d lab2.example _ipp._tcp` resolves LAN 2's
    printer, all through the router's dnsmasq."""
    r, domains = linux_laptop.browse_domains_of("example")
    _record("avahi-browse -D -p -t -d example", r)
    assert {"lab1.example", "lab2.example"} <= {d.rstrip(".") for d in domains}, r.stdout + r.stderr
    deadline = time.monotonic() + 15
    while True:
        r, added, resolved = linux_laptop.browse("_ipp._tcp", "lab2.example")
        if resolved or time.monotonic() > deadline:
            break
        time.sleep(1)
    _record("avahi-browse -p -t -k -r -d lab2.example _ipp._tcp", r)
    assert [x[0] for x in resolved] == ["Printer Two"], r.stdout + r.stderr
    assert resolved[0][3] == "farhost2.lab2.example" and resolved[0][5] == 631, resolved
    if OUT:  # as a person runs it, for the document
        _record("avahi-browse -r -t -d lab2.example _ipp._tcp",
                linux_laptop.run_tool(["avahi-browse", "-r", "-t", "-d", "lab2.example", "_ipp._tcp"]))


def _record(command, r):
    if OUT:
        with open(OUT, "a") as f:
            f.write("$ %s\n%s%s\n" % (command, r.stdout, r.stderr))


def test_refused_means_the_client_acl(lab, office):
    """Troubleshooting, first row: a proxy whose allow-clients leaves out loopback (where
    dnsmasq's forwarded queries come from) answers them REFUSED."""
    cmd = [L.Lab.proxy_bin(), "--config", _acl_config(lab), "--link", "%s=%s" % (L.R_IF2, L.ZONE2),
           "--listen", "127.0.0.1:5314", "--admin", "off", "--server-name", L.SERVER_NAME]
    lab.spawn(L.NS_R, cmd, "proxy-acl", env_extra={"DBUS_SYSTEM_BUS_ADDRESS": lab.dbus_addr})
    try:
        dig = ["dig", "@127.0.0.1", "-p", "5314", "+norec", "+time=1", "+tries=1", "lab2.example.", "SOA"]
        L.wait_for(lambda: "status: REFUSED" in L.nsrun(L.NS_R, dig, check=False).stdout, 20,
                   what="the proxy to refuse loopback")
    finally:
        lab.stop_proc("proxy-acl")


def _acl_config(lab):
    path = os.path.join(lab.dir, "office-acl.yaml")
    with open(path, "w") as f:
        f.write("allow-clients: [192.0.2.0/24]\n")
    return path
