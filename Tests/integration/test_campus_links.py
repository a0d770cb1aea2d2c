"""Many links on one proxy (issue 16), the CI form: 24 links on one router namespace
(campus_lab.py), one avahi-daemon, one proxy; scripts/bench.sh --only links runs 200.
24, not 20, so that the kernel's default IGMP membership limit (below) bites.

RFC 8766 §5.1: each link is its own delegated zone, and a browse in it is an mDNS query on
that link only, so a zone shows its link's instances and never another's. §5.5.1: TTLs
capped (10 s here); §6.1: each zone answers its SOA.

The far ends answer IPv4 mDNS only (like a printer without IPv6): on a link where the
router's avahi-daemon could not join 224.0.0.251 the browse then finds nothing, which is
what the limit test below shows. avahi-daemon joins the group on every interface through
one socket, and the kernel allows net.ipv4.igmp_max_memberships (20, per network
namespace) groups per socket; beyond, IP_ADD_MEMBERSHIP fails with ENOBUFS, avahi logs
it and carries on without IPv4 mDNS there (IPv6 mDNS still works). avahi joins lo too, and
the newest interfaces first, so with 20 or more links the first-configured links and lo go
without. The lab raises the sysctl to links + 16."""

import re
import time

import dns.name
import dns.rcode
import dns.rdatatype as T
import pytest

import campus_lab as C
import lab as L
from helpers import assert_sane, ptr_targets, rrset

N = 24
PORT = 5300
IGMP_DEFAULT = 20          # the kernel's net.ipv4.igmp_max_memberships in a new namespace
MEMBERSHIP_FAILED = "IP_ADD_MEMBERSHIP failed: No buffer space available"


@pytest.fixture(scope="module")
def campus():
    lab = C.CampusLab(N, igmp_max_memberships=N + 16, far_ipv6=False)
    lab.start()
    try:
        lab.start_proxy(port=PORT, extra="inventory-interval: 0\n")
        yield lab
    finally:
        lab.stop()


def _name(*labels, zone):
    return dns.name.Name(tuple(x.encode() for x in labels) + dns.name.from_text(zone).labels)


def _ask(lab, qname, rdtype, **kw):
    r, _s = lab.ask(qname, rdtype, port=PORT, **kw)
    assert r is not None, "no answer to %s %s" % (qname, rdtype)
    assert_sane(r)
    return r


def _browse(lab, ln, stype="_ipp._tcp", want=1, timeout=6.0):
    """PTR targets of a browse in link `ln`'s zone, repeated (bounded) until `want` show:
    the first answer may come before the responder's (RFC 8766 §5.6)."""
    qname = dns.name.from_text("%s.%s" % (stype, ln.zone))
    deadline = time.monotonic() + timeout
    while True:
        got = ptr_targets(_ask(lab, qname, T.PTR), qname)
        if len(got) >= want or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def test_every_zone_answers_soa(campus):
    """§6.1: all 24 zones answer their SOA (authoritative, the proxy as MNAME)."""
    for ln in campus.links:
        r = _ask(campus, ln.zone, T.SOA)
        soa = rrset(r, ln.zone, T.SOA)
        assert r.rcode() == dns.rcode.NOERROR and soa is not None, (ln.zone, r)
        assert soa[0].mname == dns.name.from_text(C.SERVER_NAME)


@pytest.mark.parametrize("i", [1, N // 2, N])
def test_browse_and_resolve_on_link(campus, i):
    """§5.1: a browse in link i's zone lists exactly "Printer i"; its SRV, TXT (byte-exact,
    RFC 6763 §6), A and AAAA resolve in the same zone with that link's addresses only."""
    ln = campus.links[i - 1]
    inst = _name(ln.instance, "_ipp", "_tcp", zone=ln.zone)
    assert _browse(campus, ln) == {inst}
    srv = rrset(_ask(campus, inst, T.SRV), inst, T.SRV)
    target = _name(ln.host, zone=ln.zone)
    assert srv is not None and [(rd.port, rd.target) for rd in srv] == [(631, target)]
    txt = rrset(_ask(campus, inst, T.TXT), inst, T.TXT)
    assert txt is not None and [list(rd.strings) for rd in txt] == [ln.txt]
    for rdtype, addr in ((T.A, ln.far_v4), (T.AAAA, ln.far_v6)):
        rs = rrset(_ask(campus, target, rdtype), target, rdtype)
        assert rs is not None and [rd.address for rd in rs] == [addr], (target, rdtype, rs)


def test_no_link_sees_another_links_instances(campus):
    """§5.1, isolation: every zone's browse lists its own printer and nothing else, and a
    zone never resolves another link's instance (the mDNS question goes to its link only)."""
    for ln in campus.links:
        got = _browse(campus, ln)
        assert got == {_name(ln.instance, "_ipp", "_tcp", zone=ln.zone)}, (ln.zone, got)
    first, last = campus.links[0], campus.links[-1]
    for asker, owner in ((first, last), (last, first)):
        foreign = _name(owner.instance, "_ipp", "_tcp", zone=asker.zone)
        r = _ask(campus, foreign, T.SRV)
        assert not r.answer, "%s resolves link %d's instance: %s" % (asker.zone, owner.i, r.answer)


def _ipv4_mdns_links(lab):
    """Router interfaces (lo included) that hold the 224.0.0.251 membership (`ip maddr`)."""
    out = L.nsrun(C.NS_CR, ["ip", "maddr", "show"]).stdout
    have, iface = set(), None
    for line in out.splitlines():
        m = re.match(r"^\d+:\s+(\S+)", line)
        if m:
            iface = m.group(1)
        elif "224.0.0.251" in line:
            have.add(iface)
    return have


def test_igmp_membership_limit(campus):
    """The first limit on the way to 200 links: at the kernel's default of 20 memberships,
    avahi-daemon logs ENOBUFS for the interfaces beyond and those links browse empty for
    IPv4-only devices; raised (as the lab does), every link has IPv4 mDNS again."""
    log = campus.restart_avahi(IGMP_DEFAULT)
    try:
        joined = _ipv4_mdns_links(campus)
        missing = [ln for ln in campus.links if ln.router_if not in joined]
        # one ENOBUFS per interface without the group: 24 links + lo - 20
        assert log.count(MEMBERSHIP_FAILED) == N + 1 - IGMP_DEFAULT, log
        assert len(joined) == IGMP_DEFAULT, sorted(joined)
        assert len(missing) + ("lo" not in joined) == N + 1 - IGMP_DEFAULT, sorted(joined)
        dead, alive = missing[0], next(ln for ln in campus.links if ln.router_if in joined)
        # the proxy reconnects to the new avahi-daemon by itself; fresh types: nothing cached
        assert L.wait_for(lambda: _browse(campus, alive, C.cold_type(1), timeout=0), 30,
                          interval=1.0, what="a browse on a link with IPv4 mDNS")
        assert _browse(campus, dead, C.cold_type(2), timeout=3) == set(), dead.zone
    finally:
        campus.restart_avahi(N + 16)
    assert not [ln for ln in campus.links if ln.router_if not in _ipv4_mdns_links(campus)]
    assert L.wait_for(lambda: _browse(campus, dead, C.cold_type(3), timeout=0), 30,
                      interval=1.0, what="a browse on %s after raising the limit" % dead.zone)


def test_check_config_warns_of_the_membership_limit(campus):
    """The proxy says so before avahi does: with more links than igmp_max_memberships,
    --check-config (and the start-up log) names the sysctl and a value to set."""
    cfg = campus.dir + "/check.yaml"
    with open(cfg, "w") as f:
        f.write(campus.proxy_config(campus.links, PORT))
    L.nsrun(C.NS_CR, ["sysctl", "-q", "-w", "net.ipv4.igmp_max_memberships=%d" % IGMP_DEFAULT])
    try:
        r = L.nsrun(C.NS_CR, [campus.proxy_bin(), "--config", cfg, "--check-config"], check=False)
    finally:
        L.nsrun(C.NS_CR, ["sysctl", "-q", "-w", "net.ipv4.igmp_max_memberships=%d" % campus.igmp_max])
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("links: %d interfaces for mDNS, but net.ipv4.igmp_max_memberships is %d" % (N, IGMP_DEFAULT)) in r.stdout, r.stdout
    assert "sysctl -w net.ipv4.igmp_max_memberships=256" in r.stdout
    r = L.nsrun(C.NS_CR, [campus.proxy_bin(), "--config", cfg, "--check-config"], check=False)
    assert "igmp_max_memberships" not in r.stdout, r.stdout


def test_avahi_allow_interfaces_line_limit(campus):
    """The second: avahi 0.8 reads avahi-daemon.conf with a 256-byte line buffer, so an
    allow-interfaces list of many links splits and the daemon refuses to start. The lab
    (and a campus router) leaves allow-interfaces out, or uses a short deny-interfaces."""
    names = ",".join("eth0.%d" % v for v in range(100, 140))           # 40 VLANs, ~280 chars
    conf = campus.avahi_conf().replace("enable-dbus=yes", "enable-dbus=no\nallow-interfaces=" + names)
    p = campus.spawn_avahi(C.NS_CR, "avahi-long-line", conf)
    try:
        p.wait(20)
    finally:
        campus.stop_proc("avahi-long-line")
    assert p.returncode != 0
    assert "Missing assignment" in campus.log_text("avahi-long-line")
