"""A host-name zone through the site's recursive resolver (RFC 8766 §5.3, §6.1).

Link 1 is served as `lab1.example.` with the host-name zone `lab1-hosts.example.`, which the
parent zone `example.` delegates to the proxy like the link zone (resolver_lab.py). For each
resolver, started cold in front of a freshly started proxy: a client resolves Printer One
as an application does (SRV, then the target's address), first query of each name, one
try, 4 s wait."""

import os

import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
import resolver_lab as RL
from test_resolver_path import L1_PRINTERS, _context, _instance, _name, answer_set, ask

HOSTS = "lab1-hosts.example."


@pytest.fixture(scope="module", params=RL.RESOLVERS)
def resolver(request, rlab):
    path = os.path.join(rlab.dir, "host-zone.yaml")
    with open(path, "w") as f:
        f.write("links:\n  - {interface: %s, domain: %s, host-zone: %s}\n  - {interface: %s, domain: %s}\n"
                % (L.R_IF1, L.ZONE1, HOSTS, L.R_IF2, L.ZONE2))
    rlab.restart_proxy(extra_args=["--config", path], links=False)
    rlab.start_resolver(request.param)
    yield request.param
    rlab.stop_resolver()


def test_srv_target_resolves_in_host_zone(rlab, resolver):
    """The SRV names farhost1 in the host zone, and that name's A comes back through the
    resolver's delegation to the proxy, each on the first try."""
    (n, t, port, *_r) = L1_PRINTERS[0]
    inst = _instance(n, t, L.ZONE1)
    r = ask(rlab, inst, T.SRV)
    rs = answer_set(r, inst, T.SRV)
    assert rs is not None and len(rs) == 1, _context(rlab, str(r))
    target = _name("%s.%s" % (L.FAR1_HOST, HOSTS))
    assert rs[0].target == target and rs[0].port == port, _context(rlab, str(r))
    r = ask(rlab, target, T.A)
    assert r.rcode() == dns.rcode.NOERROR, _context(rlab, str(r))
    a = answer_set(r, target, T.A)
    assert a is not None and {rd.address for rd in a} == {L.L1_V4}, _context(rlab, str(r))
