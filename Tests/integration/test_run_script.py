"""scripts/run-proxy.sh, the README's first command: with no --link it serves the interfaces
that face the site and never the uplink (the interface with the default route), stops with
one line naming the flag when there is none, and ends with a "try this" block. Run with
--dry-run (choices and command printed, nothing installed, started or changed) in a namespace
of its own: `up` has the default route, `lan` faces a subnet."""

import os
import subprocess

import pytest

import lab as L

NS = L.NS_PREFIX + "rp"
SCRIPT = os.path.join(L.REPO, "scripts", "run-proxy.sh")


def _ip(*args):
    subprocess.run(["ip", "-n", NS, *args], check=True, capture_output=True)


@pytest.fixture
def router():
    subprocess.run(["ip", "netns", "del", NS], capture_output=True)
    subprocess.run(["ip", "netns", "add", NS], check=True)
    try:
        _ip("link", "set", "lo", "up")
        for name, address in (("wan0", "203.0.113.2/24"), ("lan0", "192.0.2.1/24")):
            _ip("link", "add", name, "type", "veth", "peer", "name", name + "-peer")
            _ip("link", "set", "dev", name, "up")
            _ip("link", "set", "dev", name + "-peer", "up")
            _ip("addr", "add", address, "dev", name)
        _ip("route", "add", "default", "via", "203.0.113.1", "dev", "wan0")
        yield
    finally:
        subprocess.run(["ip", "netns", "del", NS], capture_output=True)


def _dry_run(*args):
    env = dict(os.environ, DISCOVERY_PROXY_BIN=L.Lab.proxy_bin())
    env.pop("CONFIG", None)
    return subprocess.run(["ip", "netns", "exec", NS, "bash", SCRIPT, "--dry-run", *args],
                          capture_output=True, text=True, env=env, timeout=30)


def test_serves_the_lan_never_the_uplink(router):
    p = _dry_run()
    assert p.returncode == 0, p.stderr
    assert "serving interface lan0 as lan0.home.arpa." in p.stderr
    assert "--link lan0=lan0.home.arpa." in p.stderr
    assert "wan0=" not in p.stderr and "interface wan0 " not in p.stderr, "the uplink is never served by default"
    assert "dig @127.0.0.1 +norec lan0.home.arpa. SOA" in p.stderr
    assert "dnssd-browse --server 127.0.0.1:53 --types lan0.home.arpa." in p.stderr
    assert "http://127.0.0.1:8053/" in p.stderr


def test_no_lan_interface_stops_with_the_flag_to_pass(router):
    _ip("addr", "flush", "dev", "lan0")
    p = _dry_run()
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "wan0 carries the default route" in lines[0] and "--link IFACE=DOMAIN" in lines[0]


def test_explicit_link_and_listen_are_used_as_given(router):
    p = _dry_run("--link", "wan0=wan.example.com.", "--listen", "127.0.0.1:5300")
    assert p.returncode == 0, p.stderr
    assert "--link wan0=wan.example.com. --listen 127.0.0.1:5300" in p.stderr
    assert "dig @127.0.0.1 -p 5300 +norec wan.example.com. SOA" in p.stderr


def test_avahi_settings_refuse_a_line_avahi_cannot_read(tmp_path):
    """Campus scale: avahi-daemon 0.8 reads avahi-daemon.conf in 256-byte lines, so an
    allow-interfaces line for ~40 VLANs would stop it from starting. The settings script says
    so and changes nothing."""
    conf = tmp_path / "avahi-daemon.conf"
    conf.write_text("[server]\nuse-ipv4=yes\n")
    script = os.path.join(L.REPO, "deploy", "avahi", "apply-avahi-settings.sh")
    many = ",".join("vlan%d" % i for i in range(100, 160))
    p = subprocess.run(["sh", script, "--conf", str(conf), "--interfaces", many], capture_output=True, text=True)
    assert p.returncode == 2
    assert "reads at most 254 per line" in p.stderr and "deny-interfaces=<uplink>" in p.stderr, p.stderr
    assert conf.read_text() == "[server]\nuse-ipv4=yes\n"
    p = subprocess.run(["sh", script, "--conf", str(conf), "--interfaces", "vlan100,vlan101"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and "allow-interfaces=vlan100,vlan101" in conf.read_text(), p.stderr
