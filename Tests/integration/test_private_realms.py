"""RFC 8766 §5.5.2: private addresses (RFC 1918, ULA) are not given to a client in another
address realm than the link, when the operator says which realm each is in.

A far host on link 1 (python-zeroconf, `realm-host`) has a private and a documentation
address of each family. The proxy under test says link 1 is realm `lab1` (clients
192.0.2.0/24) and names a second realm `lab2` (clients 198.51.100.0/24); clients are the
router's own addresses used as query sources. The private addresses are only record data:
nothing in the lab sends to them."""

import json
import os
import time

import dns.rdatatype as T
import pytest

import lab as L
from helpers import name, query

PORT = 5307
CONFIG = """\
links:
  - interface: %s
    domain: %s
    realm: lab1
  - interface: %s
    domain: %s
private-realms:
  lab1: [192.0.2.0/24]
  lab2: [198.51.100.0/24]
""" % (L.R_IF1, L.ZONE1, L.R_IF2, L.ZONE2)

SERVICE = {"name": "Realm Printer", "type": "_realmprn._tcp", "port": 631, "txt": ["rp=1"],
           "host": L.REALM_HOST}
INSTANCE = name("Realm Printer", "_realmprn", "_tcp")
HOST = "%s.%s" % (L.REALM_HOST, L.ZONE1)


@pytest.fixture(scope="module")
def realms_proxy(lab):
    path = os.path.join(lab.dir, "realms.yaml")
    with open(path, "w") as f:
        f.write(CONFIG)
    key = lab.responder_cmd("publish " + json.dumps(SERVICE)).split(" ", 2)[2].strip()
    # The file names the links; the lab's --link flags would add them twice.
    proc = lab.start_proxy(name="proxy-realms", port=PORT, v6=False, links=False,
                           extra_args=["--config", path, "--log-level", "info"])
    yield proc
    lab.stop_proc("proxy-realms")
    lab.responder_cmd("unpublish " + key)


def _addresses(rdtype, source, want):
    """The addresses answered for HOST to `source`, asked until they are `want` (the first
    answers may come before mDNS has every record) or 5 s have passed."""
    deadline = time.monotonic() + 5.0
    while True:
        r, _ = query(HOST, rdtype, port=PORT, source=source)
        got = sorted(rr.address for rrset in r.answer for rr in rrset)
        if got == sorted(want) or time.monotonic() > deadline:
            return got
        time.sleep(0.25)


def test_private_addresses_withheld_from_another_realm(lab, realms_proxy):
    """A client in realm lab2 gets only the documentation addresses of a lab1 host; a
    client in lab1 gets all; a client in no realm (loopback) gets all."""
    both4, both6 = ["10.20.30.40", "192.0.2.40"], ["2001:db8:1::40", "fd00:db8::40"]
    assert _addresses(T.A, L.R_V4_1, both4) == both4
    assert _addresses(T.AAAA, L.R_V4_1, both6) == both6
    assert _addresses(T.A, L.R_V4_2, ["192.0.2.40"]) == ["192.0.2.40"]
    assert _addresses(T.AAAA, L.R_V4_2, ["2001:db8:1::40"]) == ["2001:db8:1::40"]
    assert _addresses(T.A, "127.0.0.1", both4) == both4
    # Asked again from the other realm after the same realm's answers: still withheld.
    assert _addresses(T.A, L.R_V4_2, ["192.0.2.40"]) == ["192.0.2.40"]


def test_srv_additionals_follow_the_realm(lab, realms_proxy):
    """The SRV answer's additional addresses obey the same rule (RFC 6763 §12)."""
    query(INSTANCE, T.SRV, port=PORT, source=L.R_V4_1)
    _addresses(T.A, L.R_V4_1, ["10.20.30.40", "192.0.2.40"])
    _addresses(T.AAAA, L.R_V4_1, ["2001:db8:1::40", "fd00:db8::40"])

    def additional(source):
        r, _ = query(INSTANCE, T.SRV, port=PORT, source=source)
        return sorted(rr.address for rrset in r.additional
                      if rrset.rdtype in (T.A, T.AAAA) for rr in rrset)
    other = additional(L.R_V4_2)
    assert "10.20.30.40" not in other and "fd00:db8::40" not in other, other
    assert "192.0.2.40" in other, other
    same = additional(L.R_V4_1)
    assert "10.20.30.40" in same, same
