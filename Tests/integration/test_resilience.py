"""avahi-daemon restarts (README "Configuration": "If avahi-daemon is restarted,
the proxy reconnects and recreates its queries by itself"; docs/ARCHITECTURE.md
"Life of a browse": the backend reports `failed`, re-creates every browser when
the daemon is back). RFC 8766 §5.6: while mDNS is unavailable a query still
gets an answer (negative after the 6 s wait, never silence, never a crash).

The session proxy is used, and not restarted: the router's avahi-daemon is
killed by its PID and started again the same way the lab started it. The
teardown leaves avahi running and the proxy answering for later tests."""

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import dns.name
import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import ZONE2, browse_until, name, ptr_targets, query, rrset, unique

IPP1 = name("_ipp", "_tcp")
P1 = name("Printer One", "_ipp", "_tcp")
IPP2 = name("_ipp", "_tcp", zone=ZONE2)
P2 = name("Printer Two", "_ipp", "_tcp", zone=ZONE2)


_last_unhealthy = ["(not asked yet)"]


def _healthy(port=L.PROXY_PORT):
    """Browse and resolve on both links work (one attempt each). What failed last is kept
    in `_last_unhealthy`, for the message of a test that waited in vain."""
    def fail(what, r):
        _last_unhealthy[0] = "%s: %s, answer %s" % (what, dns.rcode.to_text(r.rcode()), [str(a) for a in r.answer])
        return False
    r, _ = query(IPP1, T.PTR, port=port, timeout=8)
    if P1 not in ptr_targets(r, IPP1):
        return fail("browse of link 1", r)
    r, _ = query(P1, T.SRV, port=port, timeout=8)
    srv = rrset(r, P1, T.SRV)
    if srv is None or srv[0].port != 631:
        return fail("SRV of Printer One", r)
    r, _ = query(IPP2, T.PTR, port=port, timeout=8)
    if P2 not in ptr_targets(r, IPP2):
        return fail("browse of link 2", r)
    return True


def _unhealthy(lab, what):
    """A wait_for message: what was waited for, what failed last, and the proxy's last
    log lines above debug level."""
    def message():
        lines = [l for l in lab.log_text("proxy", 3000).splitlines() if " debug " not in l][-30:]
        return "%s (last failure: %s); proxy log above debug:%s" % (
            what, _last_unhealthy[0], "".join("\n  " + l for l in lines))
    return message


@pytest.fixture
def restore(lab):
    yield
    lab.restore_after_avahi_test(_healthy)


def test_avahi_restart_recovers_without_proxy_restart(lab, restore):
    """ARCHITECTURE "Life of a browse" / README: after the router's
    avahi-daemon is killed and started again, the same proxy process answers
    browses and resolves on both links within 15 s (existing browses
    re-created, a new browse works too). While avahi is down every query is
    answered (NOERROR/no data or SERVFAIL, RFC 8766 §5.6) within the 6 s wait
    plus slack, and the proxy does not exit."""
    proxy_pid = lab.proxy.pid
    _r, got = browse_until(IPP1, [P1])
    assert P1 in got
    assert _healthy(), "the lab is not healthy before the restart"

    old_pid = lab.stop_router_avahi()
    assert old_pid is not None
    t_down = time.monotonic()
    try:
        # --- avahi is down ----------------------------------------------------
        time.sleep(1.0)
        cases = [(IPP1, T.PTR), (P1, T.SRV), (name(unique("down"), "_ipp", "_tcp"), T.SRV),
                 (name(unique("down")), T.A), (IPP2, T.PTR)]
        with ThreadPoolExecutor(len(cases)) as ex:
            down = list(ex.map(lambda c: query(c[0], c[1], timeout=12, check=False), cases))
        for (qn, _t), (r, dt) in zip(cases, down):
            assert r.rcode() in (dns.rcode.NOERROR, dns.rcode.SERVFAIL), (qn, r)
            assert dt < 9.0, "%s answered after %.1fs while avahi was down" % (qn, dt)
        print("while avahi was down: %s" % [(str(qn), dns.rcode.to_text(r.rcode()), len(r.answer),
                                             round(dt, 2)) for (qn, _t), (r, dt) in zip(cases, down)])
        r, dt = query(L.ZONE1, T.SOA, timeout=3)  # immediate answers need no avahi
        assert rrset(r, L.ZONE1, T.SOA) is not None and dt < 1.0, r
        assert lab.proxy.poll() is None, "the proxy exited while avahi was down"
    finally:
        # --- avahi is back --------------------------------------------------------
        t_up = time.monotonic()
        new_pid = lab.start_router_avahi()
    t_dbus = time.monotonic()
    assert new_pid != old_pid

    recovered = L.wait_for(lambda: _healthy() and time.monotonic(), 20, interval=0.5,
                           what=_unhealthy(lab, "browse/resolve to work again after the avahi restart"))
    took = recovered - t_up
    print("avahi down %.1fs; avahi on D-Bus %.1fs after its start; proxy answering again "
          "%.1fs after the start" % (t_up - t_down, t_dbus - t_up, took))
    assert took <= 15.0, "recovery took %.1fs (> 15 s)" % took
    # a browse that never existed before the restart works as well
    web = name("Web One", "_http", "_tcp")
    r, _ = query(web, T.TXT, timeout=12)
    assert rrset(r, web, T.TXT) is not None, r
    assert lab.proxy.poll() is None and lab.proxy.pid == proxy_pid, "the proxy was restarted"
    log = lab.log_text("proxy", 400)
    assert "Fatal error" not in log


def test_avahi_crash_sigkill_recovers(lab, restore):
    """Same as above with SIGKILL (a crash: no clean D-Bus goodbye from the
    daemon): the proxy recovers by itself within 15 s of the restart."""
    import signal
    proxy_pid = lab.proxy.pid
    assert _healthy()
    p = lab.procs["avahi-r"]
    L.kill_pid(p.pid, signal.SIGKILL)
    p.wait(5)
    lab.stop_proc("avahi-r")
    time.sleep(2.0)
    r, dt = query(P1, T.SRV, timeout=12, check=False)
    assert r.rcode() in (dns.rcode.NOERROR, dns.rcode.SERVFAIL) and dt < 9.0, r
    t_up = time.monotonic()
    lab.start_router_avahi()
    recovered = L.wait_for(lambda: _healthy() and time.monotonic(), 20, interval=0.5,
                           what=_unhealthy(lab, "browse/resolve after an avahi crash"))
    print("after SIGKILL: answering again %.1fs after avahi came back" % (recovered - t_up))
    assert recovered - t_up <= 15.0
    assert lab.proxy.poll() is None and lab.proxy.pid == proxy_pid


# ---------------------------------------------------------------------------
# Under load, with leak checks; D-Bus restart; interface down/up and addresses
# ---------------------------------------------------------------------------

ADMIN = L.PROXY_PORT + 3000


def _healthz():
    """Status code of GET /healthz on the session proxy (None if unreachable)."""
    import http.client
    try:
        conn = http.client.HTTPConnection("127.0.0.1", ADMIN, timeout=5)
        with L.netns(L.NS_R):
            conn.connect()
        conn.request("GET", "/healthz")
        r = conn.getresponse()
        r.read()
        conn.close()
        return r.status
    except OSError:
        return None


def _warm():
    for qn, t in [(IPP1, T.PTR), (P1, T.SRV), (P1, T.TXT), (IPP2, T.PTR), (P2, T.SRV)]:
        query(qn, t, timeout=10)


def test_avahi_kill_under_load_resumes_without_leaks(lab, restore):
    """Issue 5 "Faults": while a UDP probe asks a cached browse every 20 ms and
    a second load asks new names, the router's avahi-daemon is SIGKILLed and
    restarted after 3 s. /healthz turns 503 during the outage; answers for
    browses on both links resume within 5 s of avahi being back on D-Bus,
    without a proxy restart; afterwards avahi objects == live browses (every
    browse re-created once, no stale object left) and the avahi client count
    is what it was."""
    import signal
    from loadgen import UdpProbe, counters
    proxy_pid = lab.proxy.pid
    _warm()
    assert _healthy()
    time.sleep(1.0)
    c0 = counters(ADMIN)
    probe = UdpProbe(qname=IPP1, interval=0.02, max_seconds=90, timeout=1.0).start()
    stop = threading.Event()
    misses = []

    def new_names():
        for i in range(400):  # bounded: ≤ 400 × 0.1 s
            if stop.is_set():
                return
            r, dt = query(name(unique("load%d" % i)), T.A, timeout=10, check=False)
            misses.append(r.rcode())
            time.sleep(0.1)
    loader = threading.Thread(target=new_names, daemon=True)
    loader.start()
    try:
        time.sleep(2.0)
        p = lab.procs["avahi-r"]
        L.kill_pid(p.pid, signal.SIGKILL)
        p.wait(5)
        lab.stop_proc("avahi-r")
        t_down = time.monotonic()
        down_status = L.wait_for(lambda: (_healthz() == 503) or None, 10, interval=0.25,
                                 what="/healthz to report the outage")
        t_503 = time.monotonic() - t_down
        time.sleep(max(0.0, 3.0 - (time.monotonic() - t_down)))
        assert _healthz() == 503, "/healthz stopped reporting the outage while avahi is still down"
        t_start = time.monotonic()
        lab.start_router_avahi()
        t_bus = time.monotonic()
        back = L.wait_for(lambda: _healthy() and time.monotonic(), 20, interval=0.2,
                          what=_unhealthy(lab, "browse/resolve after avahi came back"))
        t_ok = L.wait_for(lambda: _healthz() == 200 and time.monotonic(), 10, interval=0.25,
                          what="/healthz ok again")
        time.sleep(2.0)
    finally:
        stop.set()
        loader.join(15)
        probe.stop()
    resumed = back - t_bus
    ps = probe.summary()
    time.sleep(1.0)
    c1 = counters(ADMIN)
    print("avahi SIGKILL under load: /healthz 503 after %.1fs (%s); avahi start->on D-Bus %.1fs; "
          "answers resumed %.1fs after D-Bus (%.1fs after start); healthz ok after %.1fs; probe %s; "
          "new-name queries %d; before %s after %s" % (
              t_503, down_status, t_bus - t_start, resumed, back - t_start, t_ok - t_bus, ps,
              len(misses), c0, c1))
    assert resumed <= 5.0, "answers resumed %.1fs after avahi was back (> 5 s)" % resumed
    assert lab.proxy.poll() is None and lab.proxy.pid == proxy_pid
    assert c1["mdns_connected"] and c1["avahi_objects"] == c1["browses"], c1
    assert c1["avahi_clients"] <= max(1, c0["avahi_clients"]), (c0, c1)
    assert all(rc in (dns.rcode.NOERROR, dns.rcode.SERVFAIL) for rc in misses), misses


def test_dbus_restart_recovers(lab, restore):
    """The router's own dbus-daemon is restarted (avahi-daemon loses the bus
    too and is restarted after it, as systemd's avahi unit would be): the
    proxy reconnects by itself and answers on both links again."""
    proxy_pid = lab.proxy.pid
    assert _healthy()
    lab.stop_router_avahi()
    lab.stop_proc("dbus-daemon")
    sock = lab.dbus_addr.split("=", 1)[1]
    if os.path.exists(sock):
        os.unlink(sock)
    time.sleep(1.0)
    t0 = time.monotonic()
    lab._dbus()
    lab.start_router_avahi()
    back = L.wait_for(lambda: _healthy() and time.monotonic(), 30, interval=0.5,
                      what=_unhealthy(lab, "answers after the D-Bus restart"))
    print("dbus-daemon + avahi restarted: answering %.1fs after dbus start" % (back - t0))
    assert lab.proxy.poll() is None and lab.proxy.pid == proxy_pid
    assert "Fatal error" not in lab.log_text("proxy", 400)


@pytest.fixture
def link1_restored(lab):
    yield
    L.nsrun(L.NS_R, ["ip", "link", "set", L.R_IF1, "up"], check=False)
    L.nsrun(L.NS_R, ["ip", "addr", "del", "203.0.113.1/24", "dev", L.R_IF1], check=False)
    have = L.nsrun(L.NS_R, ["ip", "addr", "show", "dev", L.R_IF1]).stdout
    if L.R_V4_1 + "/" not in have:
        L.nsrun(L.NS_R, ["ip", "addr", "add", L.R_V4_1 + "/24", "dev", L.R_IF1], check=False)
    if L.R_V6_1 + "/" not in have:
        L.nsrun(L.NS_R, ["ip", "-6", "addr", "add", L.R_V6_1 + "/64", "dev", L.R_IF1, "nodad"], check=False)
    lab.restore_after_avahi_test(_healthy)


def _link2_ok():
    r, _ = query(P2, T.SRV, timeout=8, check=False)
    return rrset(r, P2, T.SRV) is not None


def test_interface_down_up_and_address_change(lab, link1_restored):
    """Link 1's interface goes down: the proxy logs it within the check
    interval (5 s), keeps serving link 2, and when the interface is up again
    (with its addresses back) picks link 1 up again: browses re-created, a
    browse answers. An address added in a new subnet (203.0.113.1/24) makes its
    reverse zone served (SOA NOERROR instead of REFUSED); deleting it stops that."""
    proxy_pid = lab.proxy.pid
    assert _healthy()
    log0 = len(lab.log_text("proxy", 100000).splitlines())

    def new_log():
        return "\n".join(lab.log_text("proxy", 100000).splitlines()[log0:])

    L.nsrun(L.NS_R, ["ip", "link", "set", L.R_IF1, "down"])
    t_down = time.monotonic()
    L.wait_for(lambda: "link interface is down" in new_log(), 12, interval=0.5, what="the proxy to log the down link")
    logged = time.monotonic() - t_down
    assert _link2_ok(), "link 2 not served while link 1 is down"
    r, dt = query(P1, T.SRV, timeout=12, check=False)
    assert r.rcode() in (dns.rcode.NOERROR, dns.rcode.SERVFAIL) and dt < 9.0, r

    L.nsrun(L.NS_R, ["ip", "link", "set", L.R_IF1, "up"])
    have = L.nsrun(L.NS_R, ["ip", "addr", "show", "dev", L.R_IF1]).stdout
    if L.R_V6_1 + "/" not in have:  # Linux drops IPv6 addresses on link down
        L.nsrun(L.NS_R, ["ip", "-6", "addr", "add", L.R_V6_1 + "/64", "dev", L.R_IF1, "nodad"])
    t_up = time.monotonic()
    L.wait_for(lambda: "link interface changed" in new_log(), 12, interval=0.5, what="the proxy to log the link back")
    back = L.wait_for(lambda: _healthy() and time.monotonic(), 30, interval=0.5, what=_unhealthy(lab, "link 1 answering again"))
    print("link down logged after %.1fs; link 1 answering %.1fs after up" % (logged, back - t_up))

    rev = "113.0.203.in-addr.arpa."
    r, _ = query(rev, T.SOA, check=False)
    assert r.rcode() == dns.rcode.REFUSED, r
    L.nsrun(L.NS_R, ["ip", "addr", "add", "203.0.113.1/24", "dev", L.R_IF1])
    t_add = time.monotonic()

    def served():
        r, _ = query(rev, T.SOA, check=False)
        return r.rcode() == dns.rcode.NOERROR and rrset(r, dns.name.from_text(rev), T.SOA) is not None
    L.wait_for(served, 15, interval=0.5, what="the new subnet's reverse zone to be served")
    added = time.monotonic() - t_add
    L.nsrun(L.NS_R, ["ip", "addr", "del", "203.0.113.1/24", "dev", L.R_IF1])
    L.wait_for(lambda: query(rev, T.SOA, check=False)[0].rcode() == dns.rcode.REFUSED, 15, interval=0.5,
               what="the removed subnet's reverse zone to be refused")
    print("reverse zone %s served %.1fs after ip addr add, refused again after del" % (rev, added))
    assert lab.proxy.poll() is None and lab.proxy.pid == proxy_pid
