"""Scale requirement: "1000 instances of one type on a link must be browsable
and each resolvable", with the router's avahi-daemon at its default per-client
object limit (objects-per-client-max 1024). One PTR browse plus 1000 SRV and
1000 TXT record browsers exceed one avahi client, so this exercises the
backend's client pool (ARCHITECTURE "Life of a browse"). RFC 6763 §4 (browse),
§5/§6 (SRV, TXT byte-exact); RFC 8766 §5.5 (names rewritten into the zone),
RFC 7766 (the 1000-PTR answer needs TCP).

The far avahi-daemon on link 2 publishes 1000 `_many._tcp` instances from
static .service files written into its watched services directory for this
test only. A dedicated proxy (127.0.0.1:5303) raises mdns-query-rate/-burst so
the §9.3 rate limit (20/s by default) does not dominate; it is stopped and the
services withdrawn afterwards."""

import time
from concurrent.futures import ThreadPoolExecutor

import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import ZONE2, name, ptr_targets, query, rrset

PORT = 5303
COUNT = 1000
STYPE = "_many._tcp"
BASE_PORT = 20000


def _inst(i):
    return "Many %04d" % i


@pytest.fixture(scope="module")
def many(lab, tmp_path_factory):
    services = [(_inst(i), STYPE, BASE_PORT + i, [], [b"i=%04d" % i]) for i in range(COUNT)]
    t0 = time.monotonic()
    paths = lab.add_far_services("avahi-l2", services, "many")
    cfg = tmp_path_factory.mktemp("scale") / "scale.yaml"
    cfg.write_text("mdns-query-rate: 2000\nmdns-query-burst: 3000\n")
    try:
        lab.start_proxy(["--config", str(cfg)], name="proxy-scale", port=PORT, v6=False)
        yield {"t_written": t0}
    finally:
        lab.stop_proc("proxy-scale")
        lab.remove_far_services(paths)
        lab.check_alive("avahi-l2")


def _browse_tcp():
    q = name("_many", "_tcp", zone=ZONE2)
    r, dt = query(q, T.PTR, tcp=True, port=PORT, timeout=15)
    return r, dt, ptr_targets(r, q)


def test_1000_instances_browsable_and_resolvable(lab, many):
    """Scale requirement: all 1000 instances appear in one TCP browse answer
    (bounded wait: 180 s from publishing), and each one's SRV (port, target
    `farhost2.lab2.example.`) and TXT (byte-exact) resolve through the proxy
    (a SERVFAIL or empty answer is retried at most 6 times per name)."""
    want = {name(_inst(i), "_many", "_tcp", zone=ZONE2) for i in range(COUNT)}

    # ---- browse until all 1000 are there -------------------------------------
    deadline = many["t_written"] + 180
    seen = set()
    first_ptr_at = None
    polls = 0
    while time.monotonic() < deadline:
        lab.check_alive("proxy-scale")
        r, _dt, got = _browse_tcp()
        polls += 1
        assert r.rcode() == dns.rcode.NOERROR, r.rcode()
        assert got <= want, "unexpected names: %s" % sorted(got - want)[:5]
        if got and first_ptr_at is None:
            first_ptr_at = time.monotonic()
        seen = got
        if len(got) == COUNT:
            break
        time.sleep(1.0)
    t_all = time.monotonic()
    assert len(seen) == COUNT, "only %d of %d instances browsable after 180 s (missing e.g. %s)" % (
        len(seen), COUNT, sorted(want - seen)[:5])
    r, dt_browse, got = _browse_tcp()
    assert got == want
    print("publish→all %d browsable via the proxy: %.1fs (first instance after %.1fs, %d polls); "
          "one cached TCP browse of %d: %.3fs, %d bytes" % (
              COUNT, t_all - many["t_written"], (first_ptr_at or t_all) - many["t_written"],
              polls, COUNT, dt_browse, len(r.to_wire())))

    # ---- resolve every instance: SRV and TXT ---------------------------------
    target = name(L.FAR2_HOST, zone=ZONE2)

    def resolve(i):
        inst = name(_inst(i), "_many", "_tcp", zone=ZONE2)
        out = {}
        tries = 0
        for rdtype in (T.SRV, T.TXT):
            for attempt in range(7):
                tries += 1
                r, _dt = query(inst, rdtype, port=PORT, timeout=12)
                rs = rrset(r, inst, rdtype)
                if r.rcode() == dns.rcode.NOERROR and rs is not None:
                    out[rdtype] = rs
                    break
                time.sleep(0.5)
        return i, out, tries

    t0 = time.monotonic()
    with ThreadPoolExecutor(16) as ex:
        results = list(ex.map(resolve, range(COUNT)))
    t_resolve = time.monotonic() - t0
    lab.check_alive("proxy-scale")
    failures = []
    retries = 0
    for i, out, tries in results:
        retries += tries - 2
        srv, txt = out.get(T.SRV), out.get(T.TXT)
        if srv is None or txt is None:
            failures.append((_inst(i), "SRV" if srv is None else "TXT", "unresolved"))
            continue
        rd = srv[0]
        if (rd.port, rd.target) != (BASE_PORT + i, target) or len(srv) != 1:
            failures.append((_inst(i), "SRV", srv.to_text()))
        if [list(t.strings) for t in txt] != [[b"i=%04d" % i]]:
            failures.append((_inst(i), "TXT", txt.to_text()))
    print("resolved SRV+TXT of %d instances in %.1fs (%d retries)" % (COUNT, t_resolve, retries))
    # Limits (issue 5, hostile far-link data): 2001 browses stay within the avahi object
    # budget (8192) and the proxy's resident memory stays bounded.
    from test_hostile import browses_active, proxy_rss_kib
    browses, rss = browses_active(PORT + 3000), proxy_rss_kib(lab, "proxy-scale")
    print("proxy-scale after %d instances: %d browses active, RSS %d KiB" % (COUNT, browses, rss))
    assert 2 * COUNT < browses <= 8192, browses
    assert rss < 256 * 1024, "RSS %d KiB" % rss
    assert not failures, "%d of %d instances not resolvable: %s" % (
        len(failures), COUNT, failures[:10])
