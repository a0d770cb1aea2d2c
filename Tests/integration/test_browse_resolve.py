"""Browse (PTR), subtypes, service enumeration, SRV/TXT/A/AAAA resolution and
name rewriting (RFC 8766 §5.1, §5.3, §5.5, §5.5.2, §5.5.4; RFC 6763 §4.1,
§6, §7.1, §9, §12)."""

import json
import time

import dns.flags
import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import (ZONE1, ZONE2, assert_negative, browse_until, dig, name, ptr_targets, query,
                     rrset)

IPP1 = name("_ipp", "_tcp")
IPP1_NAMES = ("Printer One", "Printer Plain", "Dot.ted Printer", "Drucker K\u00fcche")


@pytest.fixture(scope="module")
def ipp_browse(lab):
    r, _ = browse_until(IPP1, [name(n, "_ipp", "_tcp") for n in IPP1_NAMES])
    return r


def test_browse_lists_link1_instances(ipp_browse):
    """RFC 8766 §5.1: `_ipp._tcp.<zone> PTR` lists the instances mDNS sees for
    `_ipp._tcp.local.` on that link, rewritten under the zone (§5.5); AA=1."""
    r = ipp_browse
    assert r.rcode() == dns.rcode.NOERROR
    assert r.flags & dns.flags.AA
    got = ptr_targets(r, IPP1)
    want = {name(n, "_ipp", "_tcp") for n in IPP1_NAMES}
    assert want <= got, "missing %s" % (want - got)
    assert name("Printer Two", "_ipp", "_tcp") not in got, "link-2 instance in link-1 zone"


def test_instance_labels_byte_exact(ipp_browse):
    """RFC 6763 §4.1.1 / RFC 8766 §5.3, §5.5.4: a dot inside an instance label
    stays inside one label, a space is byte 0x20 and UTF-8 is passed through
    with no Punycode."""
    labels = {t.labels[0] for t in ptr_targets(ipp_browse, IPP1)}
    assert b"Dot.ted Printer" in labels
    assert b"Drucker K\xc3\xbcche" in labels
    assert not any(lb.lower().startswith(b"xn--") for lb in labels)


def test_browse_text_form_with_dig(lab):
    """RFC 8766 §5.3: dig shows `Dot\\.ted\\032Printer._ipp._tcp.lab1.example.`
    and `Drucker\\032K\\195\\188che…` (raw bytes escaped only in presentation)."""
    browse_until(IPP1, [name(n, "_ipp", "_tcp") for n in IPP1_NAMES])
    d = dig("PTR", "_ipp._tcp." + L.ZONE1)
    assert d.status == "NOERROR", d.out
    targets = {row[4] for row in d.rows() if row[3] == "PTR"}
    assert "Dot\\.ted\\032Printer._ipp._tcp.lab1.example." in targets, d.out
    assert "Drucker\\032K\\195\\188che._ipp._tcp.lab1.example." in targets, d.out
    assert "aa" in d.flags


def test_subtype_browse(lab):
    """RFC 6763 §7.1: a subtype browse returns only the subtype instances, and
    their PTR RDATA sits under the parent type in the zone."""
    q = name("_universal", "_sub", "_ipp", "_tcp")
    r, _ = query(q, T.PTR)
    assert r.rcode() == dns.rcode.NOERROR
    got = ptr_targets(r, q)
    assert got == {name("Printer One", "_ipp", "_tcp")}, got
    q2 = name("_printer", "_sub", "_http", "_tcp")
    r2, _ = query(q2, T.PTR)
    assert ptr_targets(r2, q2) == {name("Web One", "_http", "_tcp")}


def test_services_enumeration(lab):
    """RFC 6763 §9: `_services._dns-sd._udp.<zone> PTR` returns `<Service>.<zone>`
    for the services on that link only."""
    q = name("_services", "_dns-sd", "_udp")
    svcs = [("_ipp", "_tcp"), ("_http", "_tcp"), ("_txttest", "_tcp"), ("_mixed", "_tcp")]
    r, got = browse_until(q, [name(*svc) for svc in svcs])
    assert r.rcode() == dns.rcode.NOERROR
    for svc in svcs:
        assert name(*svc) in got, "missing %s in %s" % (svc, got)
    assert name("_bulk", "_tcp") not in got, "link-2 service type listed in link-1 zone"


def test_srv_and_txt_of_avahi_instance(lab):
    """RFC 8766 §5.5: SRV target is rewritten to `host.<zone>`, port/priority/
    weight passed unchanged (RFC 6763 §5); TXT strings byte-exact (§5.5.5)."""
    inst = name("Printer One", "_ipp", "_tcp")
    r, _ = query(inst, T.SRV)
    srv = rrset(r, inst, T.SRV)
    assert srv is not None, r
    rd = srv[0]
    assert (rd.priority, rd.weight, rd.port) == (0, 0, 631)
    assert rd.target == name(L.FAR1_HOST)
    r, _ = query(inst, T.TXT)
    txt = rrset(r, inst, T.TXT)
    assert txt is not None, r
    assert sorted(txt[0].strings) == sorted([b"rp=printers/one", b"note=lab one", b"flag"])


def test_dotted_instance_resolves(lab):
    """RFC 6763 §4.1.1/§4.3: an instance with a dot in its label resolves (the
    proxy never splits on a dot inside a label)."""
    inst = name("Dot.ted Printer", "_ipp", "_tcp")
    r, _ = query(inst, T.SRV)
    srv = rrset(r, inst, T.SRV)
    assert srv is not None, r
    assert srv[0].port == 9100 and srv[0].target == name(L.FAR1_HOST)
    r, _ = query(inst, T.TXT)
    assert sorted(rrset(r, inst, T.TXT)[0].strings) == [b"txtvers=1", b"ty=Dotted"]


def test_utf8_instance_resolves(lab):
    """RFC 8766 §5.5.4: the UTF-8 name resolves as is."""
    inst = name("Drucker K\u00fcche", "_ipp", "_tcp")
    r, _ = query(inst, T.SRV)
    srv = rrset(r, inst, T.SRV)
    assert srv is not None, r
    assert srv[0].port == 9101 and srv[0].target == name(L.ZC_HOST)


def test_punycode_form_does_not_resolve(lab):
    """RFC 8766 §5.5.4: no Punycode translation: the `xn--` form of the
    instance name does not resolve (negative after the mDNS wait)."""
    puny = b"xn--" + "Drucker K\u00fcche".encode("punycode")
    inst = name(puny, "_ipp", "_tcp")
    r, _ = query(inst, T.SRV, timeout=12)
    assert_negative(r)


def test_txt_multiple_strings_equals_and_binary(lab):
    """RFC 6763 §6 / RFC 8766 §5.5.5: TXT passed byte for byte: several
    strings, strings with '=' (also leading '='), and non-ASCII bytes."""
    inst = name("Binary TXT", "_txttest", "_tcp")
    r, _ = query(inst, T.TXT)
    txt = rrset(r, inst, T.TXT)
    assert txt is not None, r
    assert sorted(txt[0].strings) == sorted(L.BINARY_TXT)


@pytest.mark.parametrize("inst", [("Empty TXT", "_txttest", "_tcp"),
                                  ("Avahi NoTxt", "_notxt", "_tcp")])
def test_empty_txt_is_single_zero_byte(lab, inst):
    """RFC 6763 §6.1: an empty TXT is emitted as one zero byte (`\\# 1 00`),
    never as a zero-length RDATA."""
    qn = name(*inst)
    r, _ = query(qn, T.TXT)  # warm (and check via dnspython)
    txt = rrset(r, qn, T.TXT)
    assert txt is not None, r
    assert txt[0].strings in ((b"",),), txt[0].strings
    d = dig("+unknownformat", "TXT", qn.to_text())
    rows = [row for row in d.rows() if row[3] in ("TXT", "TYPE16")]
    assert rows and rows[0][4].strip() == "\\# 1 00", d.out


def test_large_txt_over_tcp_byte_exact(lab):
    """RFC 6763 §6.1-6.2: a ~1250-byte TXT comes back complete over TCP."""
    inst = name("Big TXT", "_bigtxt", "_tcp")
    r, _ = query(inst, T.TXT, tcp=True)
    txt = rrset(r, inst, T.TXT)
    assert txt is not None, r
    assert list(txt[0].strings) == L.BIG_TXT or sorted(txt[0].strings) == sorted(L.BIG_TXT)


def test_host_addresses(lab):
    """RFC 8766 §5.5: `host.<zone>` A/AAAA are the mDNS addresses of `host.local.`."""
    h = name(L.FAR1_HOST)
    r, _ = query(h, T.A)
    a = rrset(r, h, T.A)
    assert a is not None and {rd.address for rd in a} == {L.L1_V4}, r
    r, _ = query(h, T.AAAA)
    aaaa = rrset(r, h, T.AAAA)
    assert aaaa is not None and {rd.address for rd in aaaa} == {L.L1_V6}, r


def test_link_local_addresses_suppressed(lab):
    """RFC 8766 §5.5.2: 169.254/16 A and fe80::/10 AAAA records are suppressed
    (the option is on by default); the routable ones are returned."""
    h = name(L.MIXED_HOST)
    r, _ = query(h, T.A)
    a = rrset(r, h, T.A)
    assert a is not None, r
    assert {rd.address for rd in a} == {"192.0.2.77"}
    r, _ = query(h, T.AAAA)
    aaaa = rrset(r, h, T.AAAA)
    assert aaaa is not None, r
    assert {rd.address for rd in aaaa} == {"2001:db8:1::77"}
    # and in additional sections too
    inst = name("Mixed Service", "_mixed", "_tcp")
    r, _ = query(inst, T.SRV)
    for rs in r.additional:
        for rd in rs:
            addr = getattr(rd, "address", "")
            assert not addr.startswith("169.254.") and not addr.lower().startswith("fe8"), rs


def test_srv_to_link_local_only_host_left_out(lab):
    """RFC 8766 §5.5.2: an SRV whose target has no usable address (here only 169.254/16
    and fe80::/10, both suppressed) is left out, and so is the browse PTR that points to
    it, once the proxy knows the target's addresses (a client asked for them); before
    that the instance is listed, since nothing is known against it. The mixed host, with
    routable addresses beside link-local ones, stays."""
    svc = {"name": "LL Printer", "type": "_llprn._tcp", "port": 631, "txt": ["ll=1"], "host": L.LL_HOST}
    key = lab.responder_cmd("publish " + json.dumps(svc)).split(" ", 2)[2].strip()
    try:
        browse = name("_llprn", "_tcp")
        inst = name("LL Printer", "_llprn", "_tcp")
        _r, found = browse_until(browse, [inst], timeout=8)
        assert inst in found, "listed while its addresses are unknown"
        r, _ = query(inst, T.SRV)
        assert rrset(r, inst, T.SRV) is not None, r
        host = name(L.LL_HOST)
        deadline = time.monotonic() + 10
        while True:  # the address browses learn the link-local addresses (answered empty)
            query(host, T.A)
            query(host, T.AAAA)
            r, _ = query(inst, T.SRV)
            if rrset(r, inst, T.SRV) is None or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert rrset(r, inst, T.SRV) is None, "SRV to a host with only link-local addresses: %s" % r
        assert_negative(r)
        r, _ = query(browse, T.PTR)
        assert inst not in ptr_targets(r, browse), r
        mixed = name("Mixed Service", "_mixed", "_tcp")
        query(name(L.MIXED_HOST), T.A)
        query(name(L.MIXED_HOST), T.AAAA)
        r, _ = query(mixed, T.SRV)
        assert rrset(r, mixed, T.SRV) is not None, r
    finally:
        lab.responder_cmd("unpublish " + key)


def test_ptr_additionals_after_resolution(lab):
    """RFC 6763 §12.1 / RFC 8766 §5.5: once resolved, a PTR answer carries the
    SRV, TXT and A/AAAA in additional, with translated names and TTL <= 10."""
    inst = name("Printer One", "_ipp", "_tcp")
    query(inst, T.SRV)
    query(inst, T.TXT)
    query(name(L.FAR1_HOST), T.A)
    query(name(L.FAR1_HOST), T.AAAA)
    r, _ = query(IPP1, T.PTR, payload=4096)
    assert rrset(r, inst, T.SRV, "additional") is not None, r
    assert rrset(r, inst, T.TXT, "additional") is not None, r
    assert (rrset(r, name(L.FAR1_HOST), T.A, "additional") is not None
            or rrset(r, name(L.FAR1_HOST), T.AAAA, "additional") is not None), r


def test_srv_answer_carries_addresses(lab):
    """RFC 6763 §12.2: with an SRV answer, the target's A/AAAA go in additional."""
    inst = name("Printer Plain", "_ipp", "_tcp")
    query(inst, T.SRV)
    query(name(L.FAR1_HOST), T.A)
    r, _ = query(inst, T.SRV)
    assert (rrset(r, name(L.FAR1_HOST), T.A, "additional") is not None
            or rrset(r, name(L.FAR1_HOST), T.AAAA, "additional") is not None), r


def test_link2_zone(lab):
    """RFC 8766 §5.1: each zone is resolved on its own link: lab2 lists Printer
    Two and its SRV target is under lab2."""
    q = name("_ipp", "_tcp", zone=ZONE2)
    r, got = browse_until(q, [name("Printer Two", "_ipp", "_tcp", zone=ZONE2)])
    assert name("Printer Two", "_ipp", "_tcp", zone=ZONE2) in got, r
    assert name("Printer One", "_ipp", "_tcp", zone=ZONE2) not in got
    inst = name("Printer Two", "_ipp", "_tcp", zone=ZONE2)
    r, _ = query(inst, T.SRV)
    srv = rrset(r, inst, T.SRV)
    assert srv is not None and srv[0].target == name(L.FAR2_HOST, zone=ZONE2), r


def test_udp_and_tcp_give_same_answer(lab):
    """RFC 8766 §5.1 / RFC 7766 §5: the same question over TCP gives the same answer."""
    inst = name("Printer One", "_ipp", "_tcp")
    ru, _ = query(inst, T.SRV)
    rt, _ = query(inst, T.SRV, tcp=True)
    assert rrset(ru, inst, T.SRV).to_rdataset() == rrset(rt, inst, T.SRV).to_rdataset()


def test_ipv6_listener(lab):
    """The [::1]:5300 listener answers like the IPv4 one (UDP and TCP)."""
    r, got = browse_until(IPP1, [name("Printer One", "_ipp", "_tcp")], v6=True)
    assert name("Printer One", "_ipp", "_tcp") in got
    r, _ = query(ZONE1, T.SOA, v6=True, tcp=True)
    assert rrset(r, ZONE1, T.SOA) is not None


@pytest.fixture(scope="module")
def proxy_no_suppress(lab):
    """A second proxy on 127.0.0.1:5301 with --suppress-link-local false."""
    lab.start_proxy(["--suppress-link-local", "false"], name="proxy-nosuppress", port=5301,
                    v6=False)
    yield 5301
    lab.stop_proc("proxy-nosuppress")


def test_link_local_addresses_with_suppression_off(lab, proxy_no_suppress):
    """RFC 8766 §5.5.2 (SHOULD be configurable): with the option off, the
    169.254/16 and fe80::/10 addresses are returned as well."""
    h = name(L.MIXED_HOST)
    for rdtype, want in ((T.A, {"192.0.2.77", "169.254.7.7"}),
                         (T.AAAA, {"2001:db8:1::77", "fe80::77"})):
        deadline = time.monotonic() + 5
        while True:  # the first answer may hold only the first mDNS packet's records
            r, _ = query(h, rdtype, port=proxy_no_suppress)
            rs = rrset(r, h, rdtype)
            got = {rd.address for rd in rs} if rs else set()
            if got == want or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert got == want, r
