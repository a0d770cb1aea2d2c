"""The mDNS gateway on several client links at once (issue 45: one far link announced on 50
client links, scripts/bench/gateway_links.py; here 3): each client link gets the far link's
allowed services from the proxy's own responder, and nothing else.

test_gateway.py's lab with `client_links=3`: link 1 is the bridge with its python-zeroconf
client, links 2 and 3 are veths into a namespace of their own (NS_GK), captured there.
"""

import time

import pytest

import test_gateway as G


@pytest.fixture(scope="module")
def links(lab):
    g = G.GatewayLab(lab, client_links=3)
    try:
        g.start()
        with open(g.config, "w") as f:
            f.write(G.links_config(3))
        yield g
    finally:
        g.stop()


def test_every_client_link_is_announced_the_far_services_and_nothing_else(links, lab):
    # Links 2 and 3 captured from before the proxy starts: its first announcements too.
    stops = {k: G.capture(lab, "links-%d" % k, G.NS_GK, G.client_link(k)[1]) for k in (2, 3)}
    links.start_proxy()
    found = links.wait_browse(lambda f: "Gw Printer" in f, "the far printer on client link 1")
    assert "Gw Web" not in found, "_http._tcp is not allowed"
    time.sleep(2)   # both announcements (RFC 6762 §8.3)
    for k, stop in stops.items():
        texts = G.answered(stop())
        assert "Gw\\032Printer._ipp._tcp.local." in texts, "link %d: the far printer not announced: %s" % (
            k, sorted(texts)[:20])
        assert "gwfar-lab1.local." in texts, "link %d: its host's address not announced" % k
        assert not any("_http._tcp" in t for t in texts), "link %d: a type not allowed was announced" % k
    metrics = links.get("/metrics")
    for interface in ("dgr-c2", "dgr-c3"):
        # Gw Printer and Shared Name: no local Shared Name on these links, nothing renamed.
        assert 'gateway_announced_instances{link="%s"} 2' % interface in metrics, metrics
