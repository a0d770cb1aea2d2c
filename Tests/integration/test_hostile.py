"""Hostile far-link data (issue 5, "Hostile input, both sides"): what a device on a far link
can put into mDNS must come out of the proxy correctly, or be dropped, and never crash it or
push it past its limits.

hostile_responder.py (a raw mDNS responder in dpt-l1) publishes instance labels that need
escaping (RFC 6763 §4.3, RFC 8766 §5.3), a 63-octet label, a 250-octet .local name that has no
room in the zone, a 9000-octet TXT, an unknown record type whose RDATA holds a .local name,
and the session's python-zeroconf responder flaps a service.

Unknown types: RFC 8766 §5.5 rewrites `.local` names inside RDATA, but only a type whose
format the proxy knows has names it can find. RFC 3597 §4 makes the RDATA of an unknown type
opaque (it must not be decompressed or changed), so the proxy passes it through byte-exact;
known types (SRV, PTR here) are rewritten into the zone (rfc-checklist 1.2)."""

import json
import os
import subprocess
import time

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype as T
import pytest

import hostile_responder as H
import lab as L
from helpers import browse_until, dig, make_query, name, ptr_targets, query, rrset, udp_raw
from test_admin import scrape

HOSTILE = name("_hostile", "_tcp")
HOST = name("hostile-host")


@pytest.fixture(scope="module")
def hostile(lab):
    proc = lab.spawn(L.NS_L1, ["/usr/bin/python3", os.path.join(L.HERE, "hostile_responder.py"),
                               "--addr", L.L1_V4], "hostile", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    assert line.strip() == "READY", (line, lab.log_text("hostile"))
    yield proc
    lab.stop_proc("hostile")


def proxy_rss_kib(lab, proc_name="proxy"):
    """VmRSS of a proxy started by the lab (`ip netns exec` execs it: same PID)."""
    with open("/proc/%d/status" % lab.procs[proc_name].pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def browses_active(port=L.PROXY_PORT + 3000):
    samples, _typed = scrape(port)
    return sum(v for (n, _l), v in samples.items() if n == "mdns_browses_active")


def _retry(fn, timeout=20.0):
    """Call fn() until it returns a truthy value (mDNS may need a retransmission)."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.5)


def test_labels_that_need_escaping_browse_and_resolve(lab, hostile):
    """RFC 6763 §4.3 / RFC 8766 §5.3: instance labels with a dot, a backslash, spaces, UTF-8
    (incl. a 4-octet emoji), a 63-octet label, quotes, parentheses and a tab come back as the
    same raw label octets under the zone; SRV and TXT resolve byte-exact over UDP and TCP."""
    want = [name(lb, "_hostile", "_tcp") for lb in H.ESCAPE_INSTANCES]
    browse_until(HOSTILE, want, timeout=20)
    r, _ = query(HOSTILE, T.PTR)
    assert ptr_targets(r, HOSTILE) == set(want)
    for i, inst in enumerate(want):
        for tcp in (False, True):
            srv = _retry(lambda: rrset(query(inst, T.SRV, tcp=tcp)[0], inst, T.SRV))
            assert srv is not None, "no SRV for %r" % inst
            assert [(rd.port, rd.target) for rd in srv] == [(8000 + i, HOST)]
            txt = _retry(lambda: rrset(query(inst, T.TXT, tcp=tcp)[0], inst, T.TXT))
            assert txt is not None, "no TXT for %r" % inst
            assert [list(rd.strings) for rd in txt] == [[b"i=%d" % i, b"label=" + H.ESCAPE_INSTANCES[i][:200]]]
    # dig's presentation format escapes the dot, the backslash and the space (RFC 1035 §5.1)
    d = dig("PTR", "_hostile._tcp." + L.ZONE1)
    assert "Dot\\.ted\\\\Back\\032slash._hostile._tcp.lab1.example." in d.out, d.out


def test_name_too_long_for_the_zone_is_dropped(lab, hostile):
    """A 250-octet .local name is 257 octets under lab1.example.: over RFC 1035 §2.3.4's 255.
    The PTR pointing at it is left out; the other instance of the type is answered."""
    browse_until(name("_long", "_tcp"), [name("Short One", "_long", "_tcp")], timeout=20)
    for tcp in (False, True):
        r, _ = query(name("_long", "_tcp"), T.PTR, tcp=tcp)
        assert r.rcode() == dns.rcode.NOERROR
        assert ptr_targets(r, name("_long", "_tcp")) == {name("Short One", "_long", "_tcp")}
    assert lab.proxy.poll() is None


def test_unknown_type_rdata_is_opaque(lab, hostile):
    """RFC 3597 §4: TYPE65280 RDATA that holds `hostile-host.local.` comes back byte-exact, not
    rewritten (the proxy cannot know it is a name). Known types are rewritten into the zone:
    the SRV target `hostile-host.local.` above came back as `hostile-host.lab1.example.`."""
    owner = name("unknown-rr")
    rs = _retry(lambda: rrset(query(owner, H.UNKNOWN_TYPE)[0], owner, H.UNKNOWN_TYPE))
    assert rs is not None, "no TYPE%d answer" % H.UNKNOWN_TYPE
    assert [rd.to_wire() for rd in rs] == [H.UNKNOWN_RDATA]
    r, _ = query(owner, H.UNKNOWN_TYPE, tcp=True)
    assert [rd.to_wire() for rd in rrset(r, owner, H.UNKNOWN_TYPE)] == [H.UNKNOWN_RDATA]


def test_9000_octet_txt(lab, hostile):
    """A 9000-octet TXT: over TCP whole and byte-exact (RFC 7766); over UDP it does not fit
    (EDNS 1232, or 512 without EDNS) so TC is set and no partial RRset is sent (RFC 2181 §9);
    a browse of its type over UDP still fits once the additional records are dropped."""
    inst = name("Huge TXT", "_hugetxt", "_tcp")
    rs = _retry(lambda: rrset(query(inst, T.TXT, tcp=True)[0], inst, T.TXT), timeout=30)
    assert rs is not None, "no TXT over TCP"
    assert [list(rd.strings) for rd in rs] == [H.HUGE_TXT_STRINGS]
    assert len(rs[0].to_wire()) == 9000
    for edns in (0, -1):
        wire = udp_raw(make_query(inst, T.TXT, edns=edns).to_wire(), timeout=10)
        assert wire is not None
        assert len(wire) <= (1232 if edns == 0 else 512)
        r = dns.message.from_wire(wire)
        assert r.flags & dns.flags.TC, "a 9000-octet TXT over UDP without TC"
        assert not r.answer, "partial answer with TC"
    r, _ = query(name("_hugetxt", "_tcp"), T.PTR)
    assert ptr_targets(r, name("_hugetxt", "_tcp")) == {inst}
    assert not r.flags & dns.flags.TC


def test_flapping_service(lab):
    """A far-link service registered and unregistered every second (20 cycles, python-zeroconf
    goodbyes): every answer meanwhile is NOERROR and lists the service or nothing, its SRV is
    the published one, the proxy keeps one browse per question (no leak) and its RSS stays put."""
    stype = "_flap._tcp"
    key = "Flapper.%s" % stype
    spec = json.dumps({"name": "Flapper", "type": stype, "port": 7777, "txt": ["flap=1"]})
    inst = name("Flapper", "_flap", "_tcp")
    ptr = name("_flap", "_tcp")
    query(ptr, T.PTR)  # start the browse before the flapping
    rss0, browses0 = proxy_rss_kib(lab), browses_active()
    answers = {"present": 0, "absent": 0}
    cycles = 20
    t_end = time.monotonic() + 120  # bound: 20 cycles of ~2-3 s
    for _ in range(cycles):
        if time.monotonic() > t_end:
            break
        for action in ("publish " + spec, "unpublish " + key):
            lab.responder_cmd(action)
            t_step = time.monotonic() + 1.0
            while time.monotonic() < t_step:
                r, _ = query(ptr, T.PTR, timeout=10)
                assert r.rcode() == dns.rcode.NOERROR, dns.rcode.to_text(r.rcode())
                got = ptr_targets(r, ptr)
                assert got <= {inst}, "unexpected PTR targets %s" % got
                answers["present" if got else "absent"] += 1
                r, _ = query(inst, T.SRV, timeout=10)
                assert r.rcode() == dns.rcode.NOERROR
                srv = rrset(r, inst, T.SRV)
                if srv is not None:
                    assert [(rd.port, rd.target) for rd in srv] == [(7777, name(L.ZC_HOST))]
                time.sleep(0.1)
    lab.check_alive("proxy")
    # After the storm the proxy follows the far link again: gone within 6 s of the last
    # goodbye (RFC 6762 §10.1 keeps a goodbye record 1 s), back within 6 s of a new announcement.
    def listed():
        r, _ = query(ptr, T.PTR)
        return inst in ptr_targets(r, ptr)
    assert _retry(lambda: not listed(), timeout=6), "still listed 6 s after the last goodbye"
    lab.responder_cmd("publish " + spec)
    assert _retry(listed, timeout=6), "not listed 6 s after being published again"
    lab.responder_cmd("unpublish " + key)
    assert _retry(lambda: not listed(), timeout=6), "still listed 6 s after the goodbye"
    rss1, browses1 = proxy_rss_kib(lab), browses_active()
    print("flap: %d cycles, answers present=%d absent=%d, RSS %d -> %d KiB, browses %d -> %d" % (
        cycles, answers["present"], answers["absent"], rss0, rss1, browses0, browses1))
    assert answers["present"] > 0
    assert browses1 - browses0 <= 4, "browses grew from %d to %d" % (browses0, browses1)
    assert rss1 < rss0 * 1.25 + 4096, "RSS grew from %d to %d KiB" % (rss0, rss1)
