"""`discovery-proxy --print-parent-zone` (RFC 8766 §6.2, RFC 6763 §11): the records printed for
the lab's links, put into a parent zone with its SOA and NS, load in BIND's named-checkzone
and in Knot (knotc zone-check); and with `name-servers` a running proxy answers the apex NS
with every proxy and the SOA MNAME of the first, so fellow proxies agree."""

import os
import re
import subprocess

import dns.rdatatype as T

import lab as L
from helpers import query

HEADER = """$TTL 3600
{origin}\tIN\tSOA\tns.example. hostmaster.example. 1 7200 3600 86400 300
{origin}\tIN\tNS\tns.example.
"""


def _printed(extra=()):
    cmd = [L.Lab.proxy_bin(), "--link", "%s=%s" % (L.R_IF1, L.ZONE1), "--link", "%s=%s" % (L.R_IF2, L.ZONE2),
           "--server-name", "ns.example.", "--listen", "203.0.113.1:53", "--print-parent-zone"] + list(extra)
    return L.nsrun(L.NS_R, cmd).stdout


def _blocks(text):
    """{zone: [record lines]} from the printed text."""
    blocks, zone = {}, None
    for line in text.splitlines():
        m = re.match(r"^; ---- in zone (\S+)", line)
        if m:
            zone = m.group(1)
            blocks[zone] = []
        elif zone and line and not line.startswith(";"):
            blocks[zone].append(line)
    return blocks


def _zone_file(tmp_path, origin, lines):
    path = tmp_path / (origin.rstrip(".") + ".zone")
    path.write_text(HEADER.format(origin=origin) + "\n".join(lines) + "\n")
    return path


def test_printed_records_load_in_bind_and_knot(lab, tmp_path):
    blocks = _blocks(_printed())
    assert {"example.", "0.192.in-addr.arpa.", "51.198.in-addr.arpa."} <= set(blocks), blocks
    example = blocks["example."]
    assert "lab1.example.\t3600\tIN\tNS\tns.example." in example
    assert "ns.example.\t3600\tIN\tA\t203.0.113.1\t; glue" in example
    assert "lb._dns-sd._udp.example.\t3600\tIN\tPTR\tlab2.example." in example
    knot_conf = tmp_path / "knot.conf"
    zones = []
    for origin, lines in blocks.items():
        path = _zone_file(tmp_path, origin, lines)
        r = subprocess.run(["named-checkzone", "-q", origin, str(path)], capture_output=True, text=True)
        assert r.returncode == 0, "named-checkzone %s:\n%s%s\n%s" % (origin, r.stdout, r.stderr, path.read_text())
        zones.append((origin, path))
    knot_conf.write_text("server:\n    rundir: %s\ndatabase:\n    storage: %s\nzone:\n%s" % (
        tmp_path, tmp_path, "".join("  - domain: %s\n    file: %s\n" % (o, p) for o, p in zones)))
    for origin, _path in zones:
        r = subprocess.run(["knotc", "-c", str(knot_conf), "zone-check", origin], capture_output=True, text=True)
        assert r.returncode == 0 and "error" not in (r.stdout + r.stderr).lower(), \
            "knotc zone-check %s:\n%s%s" % (origin, r.stdout, r.stderr)


def test_fellow_proxies_in_ns_and_soa(lab, tmp_path):
    config = tmp_path / "ha.yaml"
    config.write_text("name-servers: [ns.example., ns2.example.]\n")
    lab.start_proxy(["--config", str(config)], name="proxy-ha", port=5315, v6=False)
    try:
        r, _ = query(L.ZONE1, T.NS, port=5315)
        assert sorted(rr.target.to_text() for rrset in r.answer for rr in rrset) == ["ns.example.", "ns2.example."]
        r, _ = query(L.ZONE2, T.SOA, port=5315)
        assert r.answer[0][0].mname.to_text() == "ns.example."
        blocks = _blocks(_printed(["--config", str(config)]))
        assert "lab2.example.\t3600\tIN\tNS\tns2.example." in blocks["example."]
    finally:
        lab.stop_proc("proxy-ha")
