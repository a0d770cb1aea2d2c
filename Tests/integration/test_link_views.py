"""Per-link client views (`links[].clients`): link 2 is for clients in 192.0.2.0/24 only. From
loopback (another client network) its zones are REFUSED, counted per link, and domain
enumeration lists link 1 only; from 192.0.2.1 link 2 answers; a SIGHUP reload that drops the
restriction applies at once."""

import os
import signal
import time

import dns.name
import dns.rdatatype as T

import lab as L
from helpers import name, query
from test_admin import scrape

PORT = 5316
ADMIN = PORT + 3000
CONFIG = """\
links:
  - interface: %s
    domain: %s
  - interface: %s
    domain: %s
    clients: [192.0.2.0/24]
allow-clients: [127.0.0.0/8, 192.0.2.0/24]
"""


def _ptrs(r):
    return sorted(rr.target.to_text() for rrset in r.answer for rr in rrset if rrset.rdtype == T.PTR)


def test_views_refuse_enumerate_and_reload(lab, tmp_path):
    path = tmp_path / "views.yaml"
    path.write_text(CONFIG % (L.R_IF1, L.ZONE1, L.R_IF2, L.ZONE2))
    proc = lab.start_proxy(["--config", str(path)], name="proxy-views", port=PORT, v6=False, links=False)
    try:
        r, _ = query(L.ZONE2, T.SOA, port=PORT, check=False)
        assert r.rcode() == 5, "REFUSED for a client outside link 2's prefixes"
        r, _ = query(name("_ipp", "_tcp", zone=dns.name.from_text(L.ZONE2)), T.PTR, port=PORT, check=False)
        assert r.rcode() == 5
        r, _ = query(L.ZONE1, T.SOA, port=PORT)
        assert r.answer, "link 1 stays visible"
        r, _ = query(name("b", "_dns-sd", "_udp"), T.PTR, port=PORT)
        assert _ptrs(r) == [L.ZONE1], "enumeration lists only what this client may see"
        r, _ = query(L.ZONE2, T.SOA, port=PORT, source=L.R_V4_1)
        assert r.rcode() == 0 and r.answer, "a client in 192.0.2.0/24 sees link 2"
        r, _ = query(name("b", "_dns-sd", "_udp"), T.PTR, port=PORT, source=L.R_V4_1)
        assert _ptrs(r) == [L.ZONE1, L.ZONE2]
        samples, _typed = scrape(port=ADMIN)
        refused = {dict(labels).get("link"): v for (n, labels), v in samples.items() if n == "dns_link_refused_total"}
        assert refused.get(L.R_IF2) == 2 and refused.get(L.R_IF1) == 0, refused

        path.write_text((CONFIG % (L.R_IF1, L.ZONE1, L.R_IF2, L.ZONE2)).replace("    clients: [192.0.2.0/24]\n", ""))
        os.kill(proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while True:
            r, _ = query(L.ZONE2, T.SOA, port=PORT, check=False)
            if r.rcode() == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert r.rcode() == 0 and r.answer, "the reload applies the new view"
    finally:
        lab.stop_proc("proxy-views")
