"""Admin HTTP endpoint of the session proxy (issue "admin endpoint": GET /healthz,
/metrics, /api/services, /, POST /reload; config/discovery-proxy.yaml `admin`).

The session proxy runs in dpt-r with `--admin 127.0.0.1:8300` (lab.start_proxy), so every HTTP
request is made from a socket opened inside dpt-r. The status page is also rendered by a
real headless Chromium (Debian `chromium`) started in dpt-r, and its screenshot checked."""

import http.client
import json
import os
import re
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import ZONE2, browse_until, name, ptr_targets, query, rrset, unique

# lab.start_proxy gives every proxy instance the admin port DNS port + 3000.
ADMIN_PORT = L.PROXY_PORT + 3000

METRIC_NAMES = [
    "dns_queries_total", "dns_answer_duration_seconds", "mdns_first_result_seconds",
    "mdns_queries_started_total", "mdns_queries_rate_limited_total", "dns_acl_refused_total",
    "dns_tcp_connections_open", "dns_tcp_connections_total", "dns_queries_received_total",
    "dns_cache_entries", "dns_cache_hit_ratio", "mdns_browses_active", "mdns_backend_connected",
    "mdns_backend_reconnects_total", "avahi_clients", "dns_malformed_queries_total",
    "dns_refused_queries_total", "discovery_proxy_build_info",
]

IPP1 = name("_ipp", "_tcp")
P1 = name("Printer One", "_ipp", "_tcp")
KUECHE = "Drucker K\u00fcche"
DK = name(KUECHE, "_ipp", "_tcp")
ZC_HOST_NAME = name(L.ZC_HOST)
IPP2 = name("_ipp", "_tcp", zone=ZONE2)
P2 = name("Printer Two", "_ipp", "_tcp", zone=ZONE2)


# ---------------------------------------------------------------------------
# HTTP and Prometheus helpers
# ---------------------------------------------------------------------------

def admin_http(method, path, port=ADMIN_PORT, body=None, headers=None, timeout=10):
    """One HTTP request to the admin endpoint inside dpt-r: (status, content-type, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    with L.netns(L.NS_R):
        conn.connect()  # the socket keeps dpt-r after the block
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type") or "", r.read()
    finally:
        conn.close()


def api_services(port=ADMIN_PORT):
    status, ctype, body = admin_http("GET", "/api/services", port=port)
    assert status == 200, (status, body)
    assert ctype.startswith("application/json"), ctype
    return json.loads(body.decode("utf-8"))


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\d+)?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Prometheus text format -> ({(name, frozenset(labels)): value}, {typed names}).

    Raises AssertionError on a line that is neither a comment nor a sample."""
    samples, typed, helped = {}, {}, set()
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            m = re.match(r"^# (HELP|TYPE) (\S+)(?: (.*))?$", line)
            assert m, "malformed comment line: %r" % line
            if m.group(1) == "TYPE":
                assert m.group(2) in helped, "# TYPE %s without a # HELP line before it" % m.group(2)
                typed[m.group(2)] = m.group(3)
            else:
                assert m.group(3), "empty # HELP for %s" % m.group(2)
                helped.add(m.group(2))
            continue
        m = _SAMPLE.match(line)
        assert m, "not a Prometheus sample line: %r" % line
        labels = frozenset(_LABEL.findall(m.group(3) or ""))
        samples[(m.group(1), labels)] = float(m.group(4))
    return samples, typed


def scrape(port=ADMIN_PORT):
    status, ctype, body = admin_http("GET", "/metrics", port=port)
    assert status == 200, (status, body)
    assert ctype.startswith("text/plain"), ctype
    return parse_metrics(body.decode("utf-8"))


def metric(samples, name_, **labels):
    """Value of one sample (0 if absent: counters are created on first use)."""
    return samples.get((name_, frozenset(labels.items())), 0.0)


def has_metric(samples, typed, name_):
    if name_ in typed:
        return True
    suffixes = ("", "_bucket", "_count", "_sum", "_total")
    return any(n == name_ + s for (n, _l) in samples for s in suffixes)


def healthz(port=ADMIN_PORT):
    status, _ctype, body = admin_http("GET", "/healthz", port=port, timeout=5)
    return status, body.decode("utf-8")


# ---------------------------------------------------------------------------
# /healthz
# ---------------------------------------------------------------------------

def _dns_healthy():
    r, _ = query(IPP1, T.PTR, timeout=8)
    return P1 in ptr_targets(r, IPP1)


@pytest.fixture
def restore_avahi(lab):
    yield
    lab.restore_after_avahi_test(_dns_healthy)


def test_healthz_follows_avahi(lab, restore_avahi):
    """Issue "admin endpoint": GET /healthz is 200 `ok` while the proxy can do its job; when
    the router's avahi-daemon goes away it turns 503 within ~10 s with one reason per line
    naming avahi; when avahi-daemon is back it is 200 again within 15 s (README: the proxy
    reconnects by itself), with the same proxy process, and mdns_backend_reconnects_total
    has counted the outage once."""
    pid = lab.proxy.pid
    reconnects_before = metric(scrape()[0], "mdns_backend_reconnects_total")
    status, text = healthz()
    assert (status, text.strip()) == (200, "ok"), (status, text)

    lab.stop_router_avahi()
    try:
        t0 = time.monotonic()
        got = L.wait_for(lambda: (lambda s: s if s[0] == 503 else None)(healthz()), 10, interval=0.25,
                         what="/healthz to turn 503 after avahi-daemon stopped")
        print("503 after %.1fs: %r" % (time.monotonic() - t0, got[1]))
        reasons = [line for line in got[1].splitlines() if line.strip()]
        assert reasons, "503 without a reason"
        assert any("avahi" in r.lower() for r in reasons), "no reason names avahi: %r" % reasons
        api = api_services()
        assert api["health"]["ok"] is False and api["avahi"]["connected"] is False, api["health"]
        # the backend state may move on (failed -> connecting) between two requests
        assert any("avahi" in r.lower() for r in api["health"]["reasons"]), api["health"]
        assert api["health"]["mdnsState"] != "running", api["health"]
        # DNS still answers what needs no mDNS
        r, dt = query(L.ZONE1, T.SOA, timeout=3)
        assert r.rcode() == dns.rcode.NOERROR and dt < 1.0
    finally:
        t_up = time.monotonic()
        lab.start_router_avahi()
    L.wait_for(lambda: healthz() == (200, "ok\n"), 15, interval=0.25,
               what="/healthz to return 200 ok after avahi-daemon came back")
    print("200 again %.1fs after avahi-daemon started" % (time.monotonic() - t_up))
    assert lab.proxy.poll() is None and lab.proxy.pid == pid
    assert metric(scrape()[0], "mdns_backend_reconnects_total") - reconnects_before == 1


# ---------------------------------------------------------------------------
# /metrics
# ---------------------------------------------------------------------------

def test_metrics_move_with_queries(lab):
    """Issue "metrics": /metrics is Prometheus text format (every line a comment or a
    sample); one UDP SOA query moves dns_queries_total{transport="udp",qtype="SOA",
    rcode="NOERROR"} by exactly 1; one TCP query moves dns_queries_received_total{transport=
    "tcp"} and dns_tcp_connections_total{event="accepted"}; a browse miss records
    mdns_queries_started_total{link="dpr-l1"}; a query outside every zone (REFUSED,
    RFC 8766 §5.1) moves dns_refused_queries_total; discovery_proxy_build_info is 1."""
    s0, _ = scrape()
    r, _ = query(L.ZONE1, T.SOA)
    assert r.rcode() == dns.rcode.NOERROR
    key = dict(transport="udp", qtype="SOA", rcode="NOERROR")
    # An earlier test's identical query may have left this answer in a replay cache, whose
    # answers are counted in batches about once a second (test_replayed_answers_counted).
    L.wait_for(lambda: metric(scrape()[0], "dns_queries_total", **key) > metric(s0, "dns_queries_total", **key),
               3, interval=0.2, what="the SOA query counted")
    s1, _ = scrape()
    assert metric(s1, "dns_queries_total", **key) - metric(s0, "dns_queries_total", **key) == 1, \
        (metric(s0, "dns_queries_total", **key), metric(s1, "dns_queries_total", **key))
    assert metric(s1, "dns_queries_received_total", transport="udp") \
        - metric(s0, "dns_queries_received_total", transport="udp") == 1

    # TCP
    r, _ = query(L.ZONE2, T.SOA, tcp=True)
    assert r.rcode() == dns.rcode.NOERROR
    s2, _ = scrape()
    assert metric(s2, "dns_queries_received_total", transport="tcp") \
        - metric(s1, "dns_queries_received_total", transport="tcp") == 1
    assert metric(s2, "dns_tcp_connections_total", event="accepted") \
        - metric(s1, "dns_tcp_connections_total", event="accepted") == 1
    key = dict(transport="tcp", qtype="SOA", rcode="NOERROR")
    assert metric(s2, "dns_queries_total", **key) - metric(s1, "dns_queries_total", **key) == 1

    # a browse miss starts an mDNS query on link 1 (answered NODATA after the 6 s wait)
    miss = name("_%s" % unique("adm")[:14], "_tcp")
    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(query, miss, T.PTR, timeout=12)
        L.wait_for(lambda: metric(scrape()[0], "mdns_queries_started_total", link=L.R_IF1)
                   > metric(s2, "mdns_queries_started_total", link=L.R_IF1), 5,
                   what="mdns_queries_started_total{link=%s} to move" % L.R_IF1)
        r, _ = fut.result()
    assert r.rcode() == dns.rcode.NOERROR and not r.answer
    s3, _ = scrape()
    assert metric(s3, "mdns_queries_started_total", link=L.R_IF2) \
        == metric(s2, "mdns_queries_started_total", link=L.R_IF2), "a link-1 miss counted on link 2"
    cnt = "dns_answer_duration_seconds_count"
    assert metric(s3, cnt, cache="miss") > metric(s2, cnt, cache="miss"), \
        "dns_answer_duration_seconds{cache=miss} did not record the miss"

    # REFUSED outside the zones
    r, _ = query("outside.invalid.", T.A, check=False)
    assert r.rcode() == dns.rcode.REFUSED
    s4, _ = scrape()
    assert metric(s4, "dns_refused_queries_total") - metric(s3, "dns_refused_queries_total") == 1
    key = dict(transport="udp", qtype="A", rcode="REFUSED")
    assert metric(s4, "dns_queries_total", **key) - metric(s3, "dns_queries_total", **key) == 1
    assert metric(s4, "dns_acl_refused_total") == metric(s3, "dns_acl_refused_total"), \
        "a zone refusal counted as an ACL refusal"

    builds = [(lb, v) for (n, lb), v in s4.items() if n == "discovery_proxy_build_info"]
    assert len(builds) == 1, builds
    assert builds[0][1] == 1 and dict(builds[0][0]).get("version"), builds
    assert metric(s4, "mdns_backend_connected") == 1


def test_replayed_answers_counted(lab):
    """Answers the front end replays (the same query bytes again from the same client, see
    ReplayTicket) count in dns_queries_total like the answer they repeat, and in
    dns_answers_replayed_total{transport="udp"}: reported in batches by the replay cache's
    sweep, about once a second, through counters the ticket carries."""
    # An EDNS payload size no other test sends, so that the first query is not a replay.
    payload = 1300 + int(unique("rp")[-3:], 16) % 200
    key = dict(transport="udp", qtype="NS", rcode="NOERROR")
    s0 = scrape()[0]
    for _ in range(3):
        r, _ = query(ZONE2, T.NS, edns=0, payload=payload)
        assert r.rcode() == dns.rcode.NOERROR and r.answer
    L.wait_for(lambda: metric(scrape()[0], "dns_answers_replayed_total", transport="udp")
               - metric(s0, "dns_answers_replayed_total", transport="udp") >= 2, 5,
               what="dns_answers_replayed_total{transport=udp} to count the two replays")
    s1 = scrape()[0]
    assert metric(s1, "dns_queries_total", **key) - metric(s0, "dns_queries_total", **key) == 3, \
        (metric(s0, "dns_queries_total", **key), metric(s1, "dns_queries_total", **key))


def test_metrics_every_name_exported(lab):
    """Issue "metrics": every documented metric name is exported (a `# TYPE` line or a
    sample), after ordinary traffic (a SOA, a TCP query, a browse with results, a refusal):
    counters that have not happened yet (ACL refusals, rate-limited mDNS queries) must be
    exported as 0 rather than be missing, so that dashboards and alerts can use them."""
    query(L.ZONE1, T.SOA)
    query(L.ZONE1, T.SOA, tcp=True)
    browse_until(IPP1, [P1])
    query("outside.invalid.", T.A, check=False)
    samples, typed = scrape()
    missing = [n for n in METRIC_NAMES if not has_metric(samples, typed, n)]
    assert not missing, "metric names missing from /metrics: %s" % missing


# ---------------------------------------------------------------------------
# /api/services
# ---------------------------------------------------------------------------

def _link(api, interface):
    links = [lk for lk in api["links"] if lk["interface"] == interface]
    assert len(links) == 1, [lk["interface"] for lk in api["links"]]
    return links[0]


def test_api_services_lists_resolved_instance(lab):
    """Issue "status API": after a client browses `_ipp._tcp.lab1.example.` and resolves
    "Drucker Küche" (SRV, TXT, host A/AAAA), GET /api/services lists it under link 1 with
    its type, the UTF-8 instance name byte-exact (RFC 8766 §5.3), the host in the link zone,
    port, addresses and TXT key/values (RFC 6763 §6.3); link 2's instances are listed only
    under link 2 and link 1's never under link 2 (RFC 8766 §5.1: one zone per link)."""
    _r, got = browse_until(IPP1, [P1, DK])
    assert DK in got, got
    r, _ = query(DK, T.SRV)
    srv = rrset(r, DK, T.SRV)
    assert srv is not None, r
    assert srv[0].target == ZC_HOST_NAME and srv[0].port == 9101, srv
    r, _ = query(DK, T.TXT)
    assert rrset(r, DK, T.TXT) is not None, r
    for rdtype in (T.A, T.AAAA):
        r, _ = query(ZC_HOST_NAME, rdtype)
        assert rrset(r, ZC_HOST_NAME, rdtype) is not None, r
    _r, got2 = browse_until(IPP2, [P2])
    assert P2 in got2, got2

    api = api_services()
    for k in ("version", "startedAt", "uptimeSeconds", "health", "udpQueriesReceived",
              "tcpQueriesReceived", "tcp", "avahi", "proxy", "links"):
        assert k in api, "key %r missing from /api/services" % k
    assert api["health"]["ok"] is True, api["health"]
    l1, l2 = _link(api, L.R_IF1), _link(api, L.R_IF2)
    assert l1["zone"] == L.ZONE1 and l2["zone"] == L.ZONE2, (l1["zone"], l2["zone"])
    assert l1["activeBrowses"] >= 1

    mine = [s for s in l1["services"] if s["instance"] == KUECHE]
    assert len(mine) == 1, "%r not listed exactly once under link 1: %s" % (
        KUECHE, [s["instance"] for s in l1["services"]])
    s = mine[0]
    assert s["type"] == "_ipp._tcp", s
    assert s["host"] == "%s.%s" % (L.ZC_HOST, L.ZONE1), s
    assert s["port"] == 9101, s
    assert set(s["addresses"]) == set(L.ZC_HOSTS[L.ZC_HOST]), s
    assert s["txt"] == [{"key": "txtvers", "value": "1"}, {"key": "ty", "value": "K\u00fcche"}], s
    assert s["ageSeconds"] >= 0

    names1 = {(x["type"], x["instance"]) for x in l1["services"]}
    names2 = {(x["type"], x["instance"]) for x in l2["services"]}
    assert ("_ipp._tcp", "Printer One") in names1, names1
    assert ("_ipp._tcp", "Printer Two") in names2, names2
    assert ("_ipp._tcp", "Printer Two") not in names1, "link 2's instance listed under link 1"
    assert not {n for n in names1 if n[1] == "Printer Two" or n[1].startswith("Bulk ")}
    assert ("_ipp._tcp", KUECHE) not in names2 and ("_ipp._tcp", "Printer One") not in names2


# ---------------------------------------------------------------------------
# GET / (HTML) and a real browser
# ---------------------------------------------------------------------------

HTML_NAME = "Tom & Jerry <Print>"
HTML_TYPE = "_admhtml._tcp"


@pytest.fixture
def html_service(lab):
    """A far service (link 1) whose name needs HTML escaping, under its own service type."""
    paths = lab.add_far_services("avahi-l1", [(HTML_NAME, HTML_TYPE, 6310, [], [b"note=a<b>&c"])],
                                 prefix="adm-html-")
    try:
        yield name(HTML_NAME, "_admhtml", "_tcp")
    finally:
        lab.remove_far_services(paths)


def _chromium():
    for c in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(c)
        if p:
            return p
    return None


def test_status_page_html_and_screenshot(lab, html_service, tmp_path):
    """Issue "status page": GET / is an HTML page naming every zone and the resolved
    instances, with names HTML-escaped ("Tom & Jerry <Print>" appears as
    `Tom &amp; Jerry &lt;Print&gt;`, never as markup). A real headless Chromium in dpt-r
    renders the live page to a non-trivial PNG screenshot."""
    stype = name("_admhtml", "_tcp")
    _r, got = browse_until(stype, [html_service], timeout=15)
    assert html_service in got, got
    r, _ = query(html_service, T.SRV)
    assert rrset(r, html_service, T.SRV) is not None, r
    query(html_service, T.TXT)
    browse_until(IPP1, [P1, DK])
    query(DK, T.SRV)
    query(DK, T.TXT)

    status, ctype, body = admin_http("GET", "/")
    assert status == 200, (status, body[:500])
    assert ctype.startswith("text/html"), ctype
    page = body.decode("utf-8")
    assert "<html" in page.lower()
    for zone in (L.ZONE1, L.ZONE2):
        assert zone in page, "zone %s not on the status page" % zone
    assert KUECHE in page, "resolved instance %r not on the status page" % KUECHE
    assert "Tom &amp; Jerry &lt;Print&gt;" in page, "escaped instance name not on the page"
    assert "<Print>" not in page and "a<b>" not in page, "unescaped name/TXT in the HTML"

    browser = _chromium()
    if browser is None:
        pytest.fail("chromium is not installed (apt-get install -y chromium)")
    png = tmp_path / "status.png"
    home = tmp_path / "home"
    home.mkdir()
    cmd = ["ip", "netns", "exec", L.NS_R, browser, "--headless", "--no-sandbox", "--disable-gpu",
           "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
           "--user-data-dir=%s" % (tmp_path / "profile"), "--hide-scrollbars",
           "--screenshot=%s" % png, "--window-size=1280,900",
           "http://127.0.0.1:%d/" % ADMIN_PORT]
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_CACHE_HOME=str(home / ".cache"))
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                       timeout=90, start_new_session=True)
    print("chromium took %.1fs (exit %d)" % (time.monotonic() - t0, p.returncode))
    out = p.stdout.decode("utf-8", "replace")
    assert png.exists(), "no screenshot (exit %d):\n%s" % (p.returncode, out[-3000:])
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert len(data) > 10_000, "screenshot is only %d bytes (blank page?)" % len(data)
    keep = os.environ.get("DPT_SCREENSHOT")
    if keep:
        shutil.copyfile(png, keep)


# ---------------------------------------------------------------------------
# POST /reload
# ---------------------------------------------------------------------------

def test_post_reload(lab):
    """Issue "reload": POST /reload answers 200 `reloaded` (the session proxy has no
    --config: the same flags are applied again) and the proxy keeps answering, cache and
    all; a cross-origin POST (a web page in the operator's browser) is refused with 403;
    GET /reload is not a reload."""
    _r, got = browse_until(IPP1, [P1])
    assert P1 in got
    status, _ctype, body = admin_http("POST", "/reload")
    assert (status, body.decode()) == (200, "reloaded\n"), (status, body)
    r, dt = query(IPP1, T.PTR)
    assert P1 in ptr_targets(r, IPP1) and dt < 1.0, "browse after reload: %.2fs %s" % (dt, r)
    r, _ = query(L.ZONE2, T.SOA)
    assert r.rcode() == dns.rcode.NOERROR
    status, _ctype, body = admin_http("POST", "/reload", headers={"Origin": "http://evil.example"})
    assert status == 403, (status, body)
    status, _ctype, _body = admin_http("GET", "/reload")
    assert status in (404, 405), status
    assert "configuration reloaded" in lab.log_text("proxy", 400)
