"""avahi-daemon restarts (README "Configuration": "If avahi-daemon is restarted,
the proxy reconnects and recreates its queries by itself"; docs/ARCHITECTURE.md
"Life of a browse": the backend reports `failed`, re-creates every browser when
the daemon is back). RFC 8766 §5.6: while mDNS is unavailable a query still
gets an answer (negative after the 6 s wait, never silence, never a crash).

The session proxy is used, and not restarted: the router's avahi-daemon is
killed by its PID and started again the same way the lab started it. The
teardown leaves avahi running and the proxy answering for later tests."""

import time
from concurrent.futures import ThreadPoolExecutor

import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import ZONE2, browse_until, name, ptr_targets, query, rrset, unique

IPP1 = name("_ipp", "_tcp")
P1 = name("Printer One", "_ipp", "_tcp")
IPP2 = name("_ipp", "_tcp", zone=ZONE2)
P2 = name("Printer Two", "_ipp", "_tcp", zone=ZONE2)


def _healthy(port=L.PROXY_PORT):
    """Browse and resolve on both links work (one attempt each)."""
    r, _ = query(IPP1, T.PTR, port=port, timeout=8)
    if P1 not in ptr_targets(r, IPP1):
        return False
    r, _ = query(P1, T.SRV, port=port, timeout=8)
    srv = rrset(r, P1, T.SRV)
    if srv is None or srv[0].port != 631:
        return False
    r, _ = query(IPP2, T.PTR, port=port, timeout=8)
    return P2 in ptr_targets(r, IPP2)


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
                           what="browse/resolve to work again after the avahi restart")
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
                           what="browse/resolve after an avahi crash")
    print("after SIGKILL: answering again %.1fs after avahi came back" % (recovered - t_up))
    assert recovered - t_up <= 15.0
    assert lab.proxy.poll() is None and lab.proxy.pid == proxy_pid
