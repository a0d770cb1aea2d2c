"""EDNS0 and UDP truncation (RFC 6891 §6.1.1-§7; RFC 1035 §4.2.1; RFC 2181 §9;
RFC 6763 §12)."""

import struct

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import (ZONE1, ZONE2, browse_until, dig, make_query, name, ptr_targets, query, rrset,
                     udp_raw)

BULK = name("_bulk", "_tcp", zone=ZONE2)
BIG = name("Big TXT", "_bigtxt", "_tcp")
BIGTYPE = name("_bigtxt", "_tcp")


def test_no_opt_when_query_has_none(lab):
    """RFC 6891 §7 (MUST NOT): no OPT in the reply to a query without OPT,
    and the UDP reply is at most 512 bytes."""
    d = dig("+noedns", "PTR", "_ipp._tcp." + L.ZONE1)
    assert d.status == "NOERROR", d.out
    assert "OPT PSEUDOSECTION" not in d.out, d.out
    assert d.size is not None and d.size <= 512, d.out


def test_opt_echoed_exactly_once(lab):
    """RFC 6891 §6.1.1 (MUST): a query with OPT gets exactly one OPT back."""
    r, _ = query(ZONE1, T.SOA, edns=0, payload=1232)
    assert r.edns == 0
    assert r.opt is not None  # dnspython rejects a reply with two OPTs (FormError)


def test_bufsize_below_512_acts_as_512(lab):
    """RFC 6891 §6.2.5 (MUST): a payload size below 512 is treated as 512: an
    answer that fits 512 bytes comes back whole (TC=0), never above 512."""
    browse_until(name("_ipp", "_tcp"), [name(n, "_ipp", "_tcp") for n in
                 ("Printer One", "Printer Plain", "Dot.ted Printer", "Drucker K\u00fcche")])
    q = make_query(name("_ipp", "_tcp"), T.PTR, edns=0, payload=100)
    wire = udp_raw(q.to_wire(), timeout=10)
    assert wire is not None
    assert len(wire) <= 512
    r = dns.message.from_wire(wire)
    assert not r.flags & dns.flags.TC, "TC set although the answer fits 512 bytes"
    assert len(ptr_targets(r, name("_ipp", "_tcp"))) >= 4
    assert r.opt is not None
    d = dig("+bufsize=100", "PTR", "_ipp._tcp." + L.ZONE1)
    assert d.status == "NOERROR" and "tc" not in d.flags, d.out


def test_edns_version_1_gets_badvers(lab):
    """RFC 6891 §6.1.3 (MUST): VERSION != 0 gets BADVERS (16) with VERSION 0."""
    q = make_query(ZONE1, T.SOA, edns=0)
    wire = bytearray(q.to_wire())
    assert wire[-11:-8] == b"\x00\x00\x29"
    wire[-5] = 1  # OPT TTL = ext-rcode, VERSION, flags: set VERSION to 1
    rwire = udp_raw(bytes(wire), timeout=5)
    assert rwire is not None, "no reply to EDNS version 1"
    r = dns.message.from_wire(rwire)
    assert r.rcode() == dns.rcode.BADVERS, dns.rcode.to_text(r.rcode())
    assert r.edns == 0
    d = dig("+edns=1", "+noednsnegotiation", "SOA", L.ZONE1)
    assert d.status == "BADVERS", d.out


def test_unknown_edns_option_ignored(lab):
    """RFC 6891 §6.1.2 (MUST): unknown options are ignored."""
    opt = dns.edns.GenericOption(65001, b"\x00")
    r, _ = query(ZONE1, T.SOA, options=[opt])
    assert r.rcode() == dns.rcode.NOERROR
    assert rrset(r, ZONE1, T.SOA) is not None
    d = dig("+ednsopt=65001:00", "SOA", L.ZONE1)
    assert d.status == "NOERROR", d.out


def test_two_opts_formerr(lab):
    """RFC 6891 §6.1.1 (MUST): a query with two OPT records gets FORMERR."""
    q = make_query(ZONE1, T.SOA, edns=0)
    wire = bytearray(q.to_wire())
    opt = bytes(wire[-11:])
    assert opt[:3] == b"\x00\x00\x29"
    wire += opt
    struct.pack_into(">H", wire, 10, 2)  # ARCOUNT = 2
    rwire = udp_raw(bytes(wire), timeout=5)
    assert rwire is not None, "no reply to a query with two OPTs"
    assert struct.unpack(">H", rwire[:2])[0] == q.id
    assert (rwire[3] & 0x0F) == dns.rcode.FORMERR


def test_truncation_tc_then_tcp_full(lab):
    """RFC 1035 §4.2.1, RFC 2181 §9, checklist §6: 64 instances (~50 KB with
    additionals) over UDP with bufsize 1232 -> TC=1, reply <= 1232 bytes and
    still with OPT; the same query over TCP returns every instance, TTL <= 10."""
    want = {name("Bulk %02d" % i, "_bulk", "_tcp", zone=ZONE2) for i in range(L.BULK_COUNT)}
    browse_until(BULK, want, tcp=True)  # make sure the browse ran and is complete
    q = make_query(BULK, T.PTR, edns=0, payload=1232)
    wire = udp_raw(q.to_wire(), timeout=10)
    assert wire is not None
    assert len(wire) <= 1232
    r = dns.message.from_wire(wire, ignore_trailing=True)
    assert r.flags & dns.flags.TC, "64 PTRs do not fit 1232 bytes but TC=0"
    assert r.opt is not None, "TC=1 reply lost its OPT (RFC 6891 §7)"
    rt, _ = query(BULK, T.PTR, tcp=True)
    got = ptr_targets(rt, BULK)
    assert got == want, "TCP browse missing %d instances" % len(want - got)
    assert not rt.flags & dns.flags.TC


def test_truncation_without_opt_512(lab):
    """RFC 1035 §4.2.1 / RFC 6891 §7: without OPT the UDP reply is <= 512 bytes
    and TC=1 when the answer does not fit."""
    query(BULK, T.PTR, tcp=True, timeout=12)
    q = make_query(BULK, T.PTR, edns=-1)
    wire = udp_raw(q.to_wire(), timeout=10)
    assert wire is not None and len(wire) <= 512
    r = dns.message.from_wire(wire, ignore_trailing=True)
    assert r.flags & dns.flags.TC
    assert r.opt is None


def test_additionals_dropped_before_tc(lab):
    """RFC 2181 §9 / RFC 6763 §12: additional records that do not fit are
    dropped without TC: PTR for `_bigtxt._tcp` (its TXT is ~1250 bytes) at
    512 bytes answers the PTR with TC=0; over TCP the TXT additional is there."""
    query(BIG, T.SRV)
    query(BIG, T.TXT, tcp=True)
    query(name(L.ZC_HOST), T.A)
    q = make_query(BIGTYPE, T.PTR, edns=0, payload=512)
    wire = udp_raw(q.to_wire(), timeout=10)
    assert wire is not None and len(wire) <= 512
    r = dns.message.from_wire(wire)
    assert not r.flags & dns.flags.TC, "TC set although only additionals overflowed"
    assert ptr_targets(r, BIGTYPE) == {BIG}
    rt, _ = query(BIGTYPE, T.PTR, tcp=True)
    assert rrset(rt, BIG, T.TXT, "additional") is not None, \
        "over TCP the PTR answer should carry the known TXT in additional"


def test_big_txt_udp_truncated_then_tcp(lab):
    """RFC 2181 §9: a required RRset (the ~1250-byte TXT) that does not fit a
    512-byte reply sets TC=1; TCP returns it whole."""
    query(BIG, T.TXT, tcp=True)
    q = make_query(BIG, T.TXT, edns=0, payload=512)
    wire = udp_raw(q.to_wire(), timeout=10)
    assert wire is not None and len(wire) <= 512
    r = dns.message.from_wire(wire, ignore_trailing=True)
    assert r.flags & dns.flags.TC
    rt, _ = query(BIG, T.TXT, tcp=True)
    assert sorted(rrset(rt, BIG, T.TXT)[0].strings) == sorted(L.BIG_TXT)


@pytest.mark.parametrize("payload", [512, 1232, 4096])
def test_never_exceeds_advertised_size(lab, payload):
    """RFC 6891 §6.2.3-6.2.5 (implied): a UDP reply never exceeds the
    client's advertised payload size."""
    query(BULK, T.PTR, tcp=True, timeout=12)
    q = make_query(BULK, T.PTR, edns=0, payload=payload)
    wire = udp_raw(q.to_wire(), timeout=10)
    assert wire is not None and len(wire) <= payload
