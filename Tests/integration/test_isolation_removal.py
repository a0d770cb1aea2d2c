"""Per-link isolation and removal of services (RFC 8766 §5.1; RFC 6762 §10.1)."""

import time
from concurrent.futures import ThreadPoolExecutor

import dns.rdatatype as T
import pytest

import lab as L
from helpers import ZONE1, ZONE2, assert_negative, browse_until, name, ptr_targets, query, rrset


def test_link2_instances_never_in_link1_zone(lab):
    """RFC 8766 §5.1: each zone is resolved on its own link only: link-2
    names (service type, instance, host) are negative in lab1 and vice versa."""
    cases = [
        (name("_bulk", "_tcp"), T.PTR, ZONE1),
        (name("Printer Two", "_ipp", "_tcp"), T.SRV, ZONE1),
        (name(L.FAR2_HOST), T.A, ZONE1),
        (name("Printer One", "_ipp", "_tcp", zone=ZONE2), T.SRV, ZONE2),
        (name("Dot.ted Printer", "_ipp", "_tcp", zone=ZONE2), T.TXT, ZONE2),
    ]
    with ThreadPoolExecutor(len(cases)) as ex:
        results = list(ex.map(lambda c: query(c[0], c[1], timeout=12)[0], cases))
    for (qn, _t, zone), r in zip(cases, results):
        try:
            assert_negative(r, zone)
        except AssertionError as e:
            raise AssertionError("%s: %s" % (qn, e)) from None


def test_browse_isolation(lab):
    """RFC 8766 §5.1: browsing lab1 lists Printer One, never Printer Two; lab2
    the reverse."""
    q1, q2 = name("_ipp", "_tcp"), name("_ipp", "_tcp", zone=ZONE2)
    _r1, t1 = browse_until(q1, [name("Printer One", "_ipp", "_tcp"), name("Drucker K\u00fcche", "_ipp", "_tcp")])
    _r2, t2 = browse_until(q2, [name("Printer Two", "_ipp", "_tcp", zone=ZONE2)])
    assert all(t.is_subdomain(ZONE1) for t in t1) and all(t.is_subdomain(ZONE2) for t in t2)
    assert {t.labels[0] for t in t1} & {b"Printer One"} and not {t.labels[0] for t in t1} & {b"Printer Two"}
    assert {t.labels[0] for t in t2} == {b"Printer Two"}, t2


def test_removed_service_disappears(lab):
    """RFC 6762 §10.1 / RFC 8766 §5.6: a service removed on the far link
    (mDNS goodbye) disappears from the proxy's answers within 15 s."""
    q = name("_remove", "_tcp")
    inst = name("Removable Service", "_remove", "_tcp")
    r, got = browse_until(q, [inst])
    assert inst in got, r
    r, _ = query(inst, T.SRV)
    assert rrset(r, inst, T.SRV) is not None, r
    lab.responder_cmd("remove Removable Service")
    t0 = time.monotonic()
    try:
        gone_after = None
        while time.monotonic() - t0 < 15.0:
            r, _ = query(q, T.PTR, timeout=8)
            if inst not in ptr_targets(r, q):
                gone_after = time.monotonic() - t0
                break
            time.sleep(1.0)
        assert gone_after is not None, "removed instance still browsed after 15 s"
        r, _ = query(inst, T.SRV, timeout=12)
        assert rrset(r, inst, T.SRV) is None, "SRV of a removed instance still answered: %s" % r
    finally:
        lab.responder_cmd("add Removable Service")


def test_removal_reaches_every_client(lab):
    """Answers are encoded once per question and shared by every client until the
    records change (the proxy's answer memo): a second client's first query gets
    the first client's answer, and after a goodbye on the far link neither client
    is answered from what was shared before it (RFC 8766 §5.6)."""
    q = name("_remove", "_tcp")
    inst = name("Removable Service", "_remove", "_tcp")
    other = L.R_V4_1  # a second client address on the router
    r, got = browse_until(q, [inst])
    assert inst in got, r
    r, _ = query(q, T.PTR, source=other)
    assert inst in ptr_targets(r, q), "the second client missed what the first was told: %s" % r
    lab.responder_cmd("remove Removable Service")
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 15.0 and inst in ptr_targets(query(q, T.PTR, source=other, timeout=8)[0], q):
            time.sleep(1.0)
        r, _ = query(q, T.PTR, source=other, timeout=8)
        assert inst not in ptr_targets(r, q), "removed instance still browsed by the second client after 15 s"
        r, _ = query(q, T.PTR, timeout=8)
        assert inst not in ptr_targets(r, q), "the first client still gets the answer from before the goodbye: %s" % r
    finally:
        lab.responder_cmd("add Removable Service")


@pytest.mark.parametrize("zone", [ZONE1, ZONE2], ids=["lab1", "lab2"])
def test_no_cross_link_additionals(lab, zone):
    """RFC 8766 §5.1: every name in a response lies in the queried zone
    (answers and additionals alike)."""
    q = name("_ipp", "_tcp", zone=zone)
    r, _ = query(q, T.PTR, payload=4096)
    for rs in list(r.answer) + list(r.additional):
        assert rs.name.is_subdomain(zone), rs
