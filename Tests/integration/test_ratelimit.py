"""mDNS query rate limiting (RFC 8766 §9.3: the proxy MUST rate-limit the mDNS
queries it generates; about 20 packets/s suits 802.11). A flood of 500 unique
names under lab1's zone within ~5 s may start at most burst + rate × elapsed
new mDNS queries on link 1 (defaults: 40 and 20/s); the excess gets SERVFAIL
or a late answer, cached names keep being answered at once, other links are
not starved, and the proxy survives.

A dedicated proxy (127.0.0.1:5302, default rate settings) takes the flood so
that the session proxy's token bucket and browses stay untouched."""

import socket
import threading
import time
import uuid

import dns.message
import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import ZONE2, browse_until, make_query, name, ptr_targets, query, rrset

PORT = 5302
RATE, BURST, NEG_TIMEOUT = 20, 40, 6.0
FLOOD, FLOOD_SECONDS = 500, 5.0


@pytest.fixture(scope="module")
def flood_proxy(lab):
    lab.start_proxy(name="proxy-ratelimit", port=PORT, v6=False)
    yield PORT
    lab.stop_proc("proxy-ratelimit")


def _legit_loop(stop, results, port):
    """Query a cached browse every 0.25 s until `stop`; record (latency, ok)."""
    q = name("_ipp", "_tcp")
    inst = name("Printer One", "_ipp", "_tcp")
    for _ in range(200):  # bounded: at most 200 × (≤ 3 s)
        if stop.is_set():
            return
        try:
            r, dt = query(q, T.PTR, port=port, timeout=3)
            results.append((dt, r.rcode() == dns.rcode.NOERROR and inst in ptr_targets(r, q)))
        except Exception as e:  # noqa: BLE001 - a timeout is a failed legit query
            results.append((3.0, False, repr(e)))
        time.sleep(0.25)


def test_flood_of_unique_names_is_rate_limited(lab, flood_proxy):
    """RFC 8766 §9.3 (MUST rate-limit; S: ~20/s): 500 unique names within
    ~5 s start at most 40 + 20/s × elapsed new mDNS queries on link 1 (checked
    at every instant of the capture), every flood query gets a reply (NOERROR
    with no data, or SERVFAIL when no query could be started within the 6 s
    negative timeout), a cached browse is answered at once throughout (< 1 s),
    a new query on link 2 is not starved, and the proxy stays up."""
    port = flood_proxy
    ipp = name("_ipp", "_tcp")
    _r, got = browse_until(ipp, [name("Printer One", "_ipp", "_tcp")], port=port)
    assert name("Printer One", "_ipp", "_tcp") in got

    tag = "rl%s" % uuid.uuid4().hex[:6]
    names = [name("%s-%03d" % (tag, i)) for i in range(FLOOD)]
    local_names = {"%s-%03d.local." % (tag, i) for i in range(FLOOD)}

    with L.netns(L.NS_R):
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    sock.settimeout(0.5)
    sent = {}      # id -> qname
    replies = {}   # id -> (rcode, answers, seconds)
    sent_at = {}
    stop = threading.Event()

    def receiver():
        deadline = time.monotonic() + FLOOD_SECONDS + NEG_TIMEOUT + 20
        while time.monotonic() < deadline and len(replies) < FLOOD:
            try:
                wire = sock.recv(65535)
            except socket.timeout:
                continue
            m = dns.message.from_wire(wire)
            if m.id in sent_at and m.id not in replies:
                replies[m.id] = (m.rcode(), len(m.answer), time.monotonic() - sent_at[m.id])

    legit = []
    rx = threading.Thread(target=receiver, daemon=True)
    lt = threading.Thread(target=_legit_loop, args=(stop, legit, port), daemon=True)
    rx.start()
    lt.start()
    link2_result = {}

    def link2_probe():
        q2 = name("Printer Two", "_ipp", "_tcp", zone=ZONE2)
        r, dt = query(q2, T.SRV, port=port, timeout=12)
        link2_result["r"], link2_result["dt"] = r, dt

    t0 = time.time()
    tm0 = time.monotonic()
    used_ids = set()
    l2 = None
    for i, qn in enumerate(names):
        q = make_query(qn, T.A)
        while q.id in used_ids:
            q.id = (q.id + 1) & 0xFFFF
        used_ids.add(q.id)
        sent[q.id] = qn
        sent_at[q.id] = time.monotonic()
        sock.sendto(q.to_wire(), (L.PROXY_ADDR, port))
        if i == FLOOD // 2:
            l2 = threading.Thread(target=link2_probe, daemon=True)
            l2.start()
        pause = tm0 + (i + 1) * FLOOD_SECONDS / FLOOD - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    flood_secs = time.monotonic() - tm0
    rx.join(FLOOD_SECONDS + NEG_TIMEOUT + 25)
    stop.set()
    lt.join(10)
    if l2 is not None:
        l2.join(15)
    sock.close()
    time.sleep(0.5)

    lab.check_alive("proxy-ratelimit")

    # ---- mDNS queries that left the router on link 1 -------------------------
    first_seen = {}
    packets_v4 = set()
    for ts, qn, _t, src in lab.capture.queries(since=t0 - 0.05):
        if qn in local_names:
            first_seen.setdefault(qn, ts)
            if src == L.R_V4_1:
                packets_v4.add((ts, src))
        elif qn.startswith(tag):
            pytest.fail("flood name %s asked as something else than <name>.local." % qn)
    wrong_link = [(ts, qn, src) for ts, qn, _t, src in lab.capture.queries(since=t0 - 0.05)
                  if qn in local_names and src in (L.R_V4_2, L.R_V6_2)]
    assert not wrong_link, "flood names queried on link 2: %s" % wrong_link[:5]
    starts = sorted(first_seen.values())
    worst = None
    for k, ts in enumerate(starts, 1):
        allowed = BURST + RATE * max(0.0, ts - t0) + 5  # +5: capture/clock slack
        if k > allowed and worst is None:
            worst = (k, ts - t0, allowed)
    per_second = {}
    for ts in starts:
        per_second[int(ts - t0)] = per_second.get(int(ts - t0), 0) + 1
    summary = ("flood of %d sent in %.2fs; %d distinct names reached mDNS on link 1 over %.1fs "
               "(%d IPv4 query packets carrying them); new names per second: %s" % (
                   FLOOD, flood_secs, len(starts), (starts[-1] - t0) if starts else 0.0,
                   len(packets_v4), dict(sorted(per_second.items()))))
    print(summary)
    assert worst is None, "rate limit exceeded: %d names started %.2fs after the flood began " \
        "(allowed %.0f). %s" % (worst[0], worst[1], worst[2], summary)
    assert starts, "no flood name reached mDNS at all; the capture or the proxy is broken"

    # ---- every flood query answered: negative or SERVFAIL --------------------
    missing = [sent[i] for i in sent if i not in replies]
    assert not missing, "%d flood queries got no reply at all (e.g. %s)" % (len(missing), missing[:3])
    rcodes = {}
    for rc, nans, _dt in replies.values():
        rcodes[dns.rcode.to_text(rc)] = rcodes.get(dns.rcode.to_text(rc), 0) + 1
        assert nans == 0, "a name nobody owns got an answer"
    print("flood replies by rcode: %s; slowest %.1fs" % (rcodes, max(d for _r, _n, d in replies.values())))
    assert set(rcodes) <= {"NOERROR", "SERVFAIL"}, rcodes
    assert rcodes.get("SERVFAIL", 0) > 0, \
        "no SERVFAIL: the limiter let all %d names through? %s" % (FLOOD, rcodes)
    started_bound = BURST + RATE * (flood_secs + NEG_TIMEOUT) + 10
    assert rcodes.get("NOERROR", 0) <= started_bound, (rcodes, started_bound)

    # ---- the legitimate cached query kept working ---------------------------
    assert len(legit) >= 10, legit
    bad = [x for x in legit if not x[1] or x[0] >= 1.0]
    assert not bad, "cached query failed or slow during the flood: %s of %d: %s" % (
        len(bad), len(legit), bad[:5])
    print("cached query during the flood: %d answered, slowest %.3fs" % (
        len(legit), max(x[0] for x in legit)))

    # ---- link 2 has its own bucket -------------------------------------------
    assert "r" in link2_result, "the link-2 query got no answer"
    q2 = name("Printer Two", "_ipp", "_tcp", zone=ZONE2)
    assert rrset(link2_result["r"], q2, T.SRV) is not None, \
        "link 2 starved by a link-1 flood: %s" % link2_result["r"]

    # ---- and it still answers new names once the flood is over ----------------
    time.sleep(BURST / RATE)
    r, _ = query(name("Web One", "_http", "_tcp"), T.SRV, port=port, timeout=12)
    assert rrset(r, name("Web One", "_http", "_tcp"), T.SRV) is not None, r
