"""Answer timing and mDNS traffic: a miss is answered at the first result, a
cache hit at once with no multicast (RFC 8766 §5.1, §5.6, §8). mDNS traffic
is captured by tcpdump on every interface of dpt-r."""

import time

import dns.rdatatype as T

from helpers import ZONE1, name, ptr_targets, query, unique


def _sent(lab, since, until, qname):
    return [(ts, src) for ts, n, t, src in lab.capture.queries(since=since, until=until)
            if n == qname]


def test_miss_answered_at_first_result(lab):
    """RFC 8766 §5.6: with nothing cached, reply as soon as the first mDNS
    answer arrives (not after the 6 s wait); §5.1: the mDNS question is the
    query name with the zone replaced by `local.` (loose bound: < 3 s)."""
    q = name("_fresh", "_tcp")
    t0 = time.time()
    r, dt = query(q, T.PTR)
    assert name("Fresh Service", "_fresh", "_tcp") in ptr_targets(r, q), r
    assert dt < 3.0, "first answer after %.2fs; the proxy must not wait for 6 s" % dt
    time.sleep(0.5)
    assert _sent(lab, t0 - 0.1, None, "_fresh._tcp.local."), "no mDNS query for _fresh._tcp.local."


def test_cache_hit_immediate_without_multicast(lab):
    """RFC 8766 §5.6: a repeat query within 10 s is a cache hit: answered at
    once (loose bound < 0.5 s) and no new mDNS query is sent for it. The
    repeat is sent 4 s after the first query, between avahi's own re-queries
    of a running browse (0, 1, 3, 7 s)."""
    q = name("_cacheprobe", "_tcp")
    inst = name("Cache Probe", "_cacheprobe", "_tcp")
    t0 = time.time()
    r, _ = query(q, T.PTR)
    assert inst in ptr_targets(r, q), r
    time.sleep(max(0.0, t0 + 4.0 - time.time()))
    t1 = time.time()
    r2, dt = query(q, T.PTR)
    assert inst in ptr_targets(r2, q), r2
    assert dt < 0.5, "cache hit took %.2fs" % dt
    time.sleep(1.0)
    sent = _sent(lab, t1 - 0.05, t1 + 1.0, "_cacheprobe._tcp.local.")
    assert not sent, "a cache hit sent mDNS queries: %s" % sent
    assert _sent(lab, t0 - 0.1, t1, "_cacheprobe._tcp.local."), \
        "capture saw no query for the first (miss) lookup; the capture is broken"


def test_mdns_over_ipv4_and_ipv6(lab):
    """RFC 8766 §8 (SHOULD): mDNS is queried over both IPv4 (224.0.0.251) and
    IPv6 (ff02::fb) on the link (a never-seen name, so the proxy must ask)."""
    inst = name(unique(), "_ipp", "_tcp")
    t0 = time.time()
    query(inst, T.SRV, timeout=12)
    local = inst.relativize(ZONE1).to_text().lower() + ".local."
    srcs = {src for _ts, src in _sent(lab, t0 - 0.1, None, local)}
    assert srcs, "no mDNS query for %s" % local
    assert any(":" not in s for s in srcs), "no IPv4 mDNS query for %s" % local
    assert any(":" in s for s in srcs), "no IPv6 mDNS query for %s" % local
