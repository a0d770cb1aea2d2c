"""A host-name zone per link (RFC 8766 §5.3, §5.4, §5.5): the link's DNS-SD names stay in its
rich-text zone, here `Building 1.example.` with a space, while host names (SRV targets,
owners of addresses, reverse-lookup targets) are shown in its LDH zone `b1-hosts.example.`,
which answers the hosts' addresses itself. Asked with dig, a real client."""

import os
import time

import dns.name
import dns.rdatatype as T
import dns.reversename
import pytest

import lab as L
from helpers import dig, query, rrset

PORT = 5308
RICH = "Building 1.example."
HOSTS = "b1-hosts.example."
CONFIG = """\
links:
  - interface: %s
    domain: "%s"
    host-zone: %s
  - interface: %s
    domain: %s
""" % (L.R_IF1, RICH, HOSTS, L.R_IF2, L.ZONE2)


@pytest.fixture(scope="module")
def host_zone_proxy(lab):
    path = os.path.join(lab.dir, "host-zone.yaml")
    with open(path, "w") as f:
        f.write(CONFIG)
    proc = lab.start_proxy(name="proxy-hostzone", port=PORT, v6=False, links=False, apex=HOSTS,
                           extra_args=["--config", path, "--log-level", "info"])
    yield proc
    lab.stop_proc("proxy-hostzone")


RICH_NAME = dns.name.Name([b"Building 1", b"example", b""])


def _name(*labels):
    return dns.name.Name([label.encode() for label in labels] + list(RICH_NAME.labels))


def _until(qname, rdtype, ok, timeout=8.0):
    deadline = time.monotonic() + timeout
    while True:
        r, _ = query(qname, rdtype, port=PORT)
        if ok(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.3)


def test_srv_target_and_addresses_in_the_host_zone(lab, host_zone_proxy):
    """The SRV of an instance in the rich-text zone names its host in the LDH zone, and that
    name answers the host's address there (A asked of mDNS on link 1)."""
    inst = _name("Printer One", "_ipp", "_tcp")
    target = dns.name.from_text("%s.%s" % (L.FAR1_HOST, HOSTS))
    r = _until(inst, T.SRV, lambda r: rrset(r, inst, T.SRV) is not None)
    srv = rrset(r, inst, T.SRV)
    assert srv is not None and {rd.target for rd in srv} == {target}, r
    r = _until(target, T.A, lambda r: rrset(r, target, T.A) is not None)
    assert {rd.address for rd in rrset(r, target, T.A)} == {L.L1_V4}, r
    assert r.flags & 0x0400, "authoritative (AA)"
    # Only host names live there: a DNS-SD name in the host zone is NODATA at once.
    r, elapsed = query("_ipp._tcp." + HOSTS, T.PTR, port=PORT)
    assert not r.answer and elapsed < 0.5, r
    # The host zone has its own apex.
    r, _ = query(HOSTS, T.SOA, port=PORT)
    assert rrset(r, HOSTS, T.SOA) is not None, r


def test_dig_in_both_zones(lab, host_zone_proxy):
    """dig: the browse is in the rich-text zone; the host's address in the LDH zone."""
    d = dig("-p", str(PORT), "+tcp", "A", "%s.%s" % (L.FAR1_HOST, HOSTS))
    rows = [r for r in d.rows() if r[3] == "A"]
    assert rows and rows[0][4] == L.L1_V4, d.out


def test_reverse_lookup_target_in_the_host_zone(lab, host_zone_proxy):
    """RFC 8766 §5.4/§5.5: `dig -x` of the far host's address names it in the LDH zone."""
    qname = dns.reversename.from_address(L.L1_V4)
    want = dns.name.from_text("%s.%s" % (L.FAR1_HOST, HOSTS))
    r = _until(qname, T.PTR, lambda r: rrset(r, qname, T.PTR) is not None)
    assert {rd.target for rd in rrset(r, qname, T.PTR)} == {want}, r
