"""dnssd-browse, the unicast DNS-SD client (RFC 6763 browse, resolve, §9 service
types, §11 domain enumeration), run inside dpt-r against the proxy at
127.0.0.1:5300. The binary comes from DNSSD_BROWSE_BIN (default
.build/debug/dnssd-browse)."""

import json
import os
import queue
import socket
import subprocess
import threading
import time

import pytest

import lab as L

SERVER = "%s:%d" % (L.PROXY_ADDR, L.PROXY_PORT)
BACKTRACE = ("Fatal error", "Stack dump", "Backtrace", "Current stack trace", "0x0000")


def cli_bin():
    p = os.environ.get("DNSSD_BROWSE_BIN", ".build/debug/dnssd-browse")
    p = p if os.path.isabs(p) else os.path.join(L.REPO, p)
    if not os.access(p, os.X_OK):
        pytest.skip("dnssd-browse binary %s not found (build it or set DNSSD_BROWSE_BIN)" % p)
    return p


def cli(*args, server=SERVER, timeout=40):
    """Run dnssd-browse in dpt-r; return (exit code, stdout, stderr)."""
    cmd = [cli_bin()] + (["--server", server] if server else []) + list(args)
    r = L.nsrun(L.NS_R, cmd, check=False, timeout=timeout)
    for marker in BACKTRACE:
        assert marker not in r.stderr, r.stderr
    return r.returncode, r.stdout, r.stderr


def cli_until(pred, *args, timeout=20, **kw):
    """Repeat a command until pred(rc, out, err) holds (the first browse of a type
    answers with what mDNS found in its first 50 ms)."""
    deadline = time.monotonic() + timeout
    while True:
        rc, out, err = cli(*args, **kw)
        if pred(rc, out, err) or time.monotonic() > deadline:
            return rc, out, err
        time.sleep(1)


def one_error_line(err):
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, "expected one stderr line, got:\n%s" % err
    assert lines[0].startswith("dnssd-browse: "), lines[0]
    return lines[0]


LAB1_IPP = ["Printer One", "Printer Plain", "Dot.ted Printer", "Drucker K\u00fcche"]


def test_browse_lists_instances_with_header(lab):
    """RFC 6763 §4: a browse prints a header and one line per instance (name
    unescaped: a dot and UTF-8 inside one label), link 1 only."""
    rc, out, err = cli_until(lambda rc, o, e: all(n in o for n in LAB1_IPP), "_ipp._tcp", L.ZONE1)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "Browsing for _ipp._tcp. in lab1.example. at %s" % SERVER, out
    assert lines[1].split() == ["Domain", "Service", "Type", "Instance", "Name"], out
    for n in LAB1_IPP:
        assert any(line.split(None, 2)[2:] == [n] and line.startswith("lab1.example.") and "_ipp._tcp." in line
                   for line in lines[2:]), (n, out)
    assert "Printer Two" not in out


def test_browse_over_tcp_and_second_zone(lab):
    rc, out, err = cli_until(lambda rc, o, e: "Printer Two" in o, "--tcp", "_ipp._tcp", L.ZONE2)
    assert rc == 0, err
    assert "Printer Two" in out and "Printer One" not in out


def test_browse_json(lab):
    rc, out, err = cli_until(lambda rc, o, e: all(n in o for n in ["Dot.ted Printer", "Drucker K\u00fcche"]),
                             "--json", "_ipp._tcp", L.ZONE1)
    assert rc == 0, err
    doc = json.loads(out)
    assert list(doc) == ["server", "type", "domains", "instances"]
    assert doc["server"] == SERVER and doc["type"] == "_ipp._tcp." and doc["domains"] == ["lab1.example."]
    by_name = {i["name"]: i for i in doc["instances"]}
    assert list(by_name["Dot.ted Printer"]) == ["name", "type", "domain", "fullname", "ttl"]
    assert by_name["Dot.ted Printer"]["fullname"] == "Dot\\.ted\\032Printer._ipp._tcp.lab1.example."
    assert by_name["Drucker K\u00fcche"]["domain"] == "lab1.example."
    assert all(0 < i["ttl"] <= 10 for i in doc["instances"])


def test_browse_nothing_is_not_an_error(lab):
    """A browse that finds nothing says so and exits 0 (after the proxy's 6 s miss)."""
    rc, out, err = cli("_nothing-here._tcp", L.ZONE1)
    assert rc == 0, err
    assert out.splitlines()[-1] == "no instances", out


@pytest.mark.parametrize("inst,port,txt,addrs", [
    ("Printer One", 631, ["rp=printers/one", "note=lab one", "flag"], ["192.0.2.10"]),
    ("Dot.ted Printer", 9100, ["txtvers=1", "ty=Dotted"], ["192.0.2.10"]),
    ("Drucker K\u00fcche", 9101, ["txtvers=1", "ty=K\u00fcche"], ["192.0.2.20", "2001:db8:1::20"]),
], ids=["plain", "dotted", "utf8"])
def test_resolve(lab, inst, port, txt, addrs):
    """dns-sd -L style: host, port, addresses of the SRV target, TXT as key=value;
    the instance name is one label (RFC 6763 §4.3)."""
    rc, out, err = cli_until(lambda rc, o, e: rc == 0 and all(a in o for a in addrs),
                             "--resolve", inst, "_ipp._tcp", L.ZONE1)
    assert rc == 0, err
    assert (":%d (priority" % port) in out, out
    assert "  port:      %d" % port in out
    for a in addrs:
        assert a in out, out
    assert "fe80" not in out and "169.254" not in out
    txt_lines = [line[13:] for line in out.splitlines() if line.startswith("  TXT:") or line.startswith(" " * 13)]
    assert txt_lines == txt, out


def test_resolve_json(lab):
    rc, out, err = cli_until(lambda rc, o, e: rc == 0 and "192.0.2.20" in o,
                             "--json", "--resolve", "Drucker K\u00fcche", "_ipp._tcp", L.ZONE1)
    assert rc == 0, err
    doc = json.loads(out)
    assert list(doc) == ["server", "name", "type", "domain", "fullname", "host", "port", "priority", "weight",
                         "addresses", "txt", "ttl"]
    assert doc["name"] == "Drucker K\u00fcche" and doc["port"] == 9101
    assert doc["fullname"] == "Drucker\\032K\\195\\188che._ipp._tcp.lab1.example."
    assert doc["host"] == "zc-host.lab1.example."
    assert {"key": "ty", "value": "K\u00fcche"} in doc["txt"]


def test_resolve_binary_txt(lab):
    """RFC 6763 §6.4: a string starting with '=' is ignored; values are opaque bytes."""
    rc, out, err = cli_until(lambda rc, o, e: rc == 0, "--json", "--resolve", "Binary TXT", "_txttest._tcp", L.ZONE1)
    assert rc == 0, err
    txt = json.loads(out)["txt"]
    assert txt == [{"key": "key", "value": "val=ue"}, {"key": "bin", "value": "\\x00\\x01\\x7F\\x80\\xFE\\xFF"},
                   {"key": "flag", "value": None}, {"key": "utf8", "value": "K\u00fcche"}], txt


def test_resolve_missing_instance_exits_1(lab):
    rc, out, err = cli("--resolve", "No Such Printer", "_ipp._tcp", L.ZONE1)
    assert rc == 1, (rc, out, err)
    line = one_error_line(err)
    assert "No Such Printer" in line and "not found" in line


def test_types(lab):
    """RFC 6763 §9: _services._dns-sd._udp lists the service types of the link."""
    rc, out, err = cli_until(lambda rc, o, e: "_ipp._tcp." in o and "_http._tcp." in o, "--types", L.ZONE1)
    assert rc == 0, err
    assert "Printer Two" not in out and "_bulk._tcp." not in out
    rc, out, err = cli("--types", "--json", L.ZONE1)
    doc = json.loads(out)
    assert list(doc) == ["server", "domains", "types"]
    assert "_ipp._tcp." in [t["type"] for t in doc["types"]]


def test_domains(lab):
    """RFC 6763 §11: b/db/lb._dns-sd._udp under a zone list the browse domains."""
    rc, out, err = cli("--domains", L.ZONE1)
    assert rc == 0, err
    rows = {line.split()[0]: line for line in out.splitlines()[2:]}
    assert set(rows) >= {"lab1.example.", "lab2.example."}, out
    assert "default" in rows["lab1.example."] and "legacy" in rows["lab1.example."], out
    doc = json.loads(cli("--domains", "--json", L.ZONE1)[1])
    entry = {d["domain"]: d for d in doc["domains"]}["lab2.example."]
    assert list(entry) == ["domain", "browse", "default", "legacy", "source", "ttl"]
    assert entry["browse"] is True


def test_browse_domains_discovered_from_resolv_conf(lab, tmp_path):
    """Without DOMAIN: lb/b._dns-sd._udp under each search domain of resolv.conf."""
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 192.0.2.53\nsearch example.org lab1.example\n")
    rc, out, err = cli_until(lambda rc, o, e: "Printer Two" in o and "Printer One" in o,
                             "--resolv-conf", str(conf), "_ipp._tcp")
    assert rc == 0, err
    assert "in lab1.example., lab2.example." in out.splitlines()[0], out
    rc, out, err = cli("--resolv-conf", str(conf), "--domains")
    assert rc == 0 and "lab2.example." in out, (rc, out, err)


def test_no_browse_domain_is_an_error(lab, tmp_path):
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 127.0.0.1\nsearch example.org\n")
    rc, out, err = cli("--resolv-conf", str(conf), "_ipp._tcp")
    assert rc == 1, (rc, out, err)
    line = one_error_line(err)
    assert "no browse domain" in line and "example.org." in line
    conf.write_text("nameserver 127.0.0.1\n")
    rc, out, err = cli("--resolv-conf", str(conf), "_ipp._tcp")
    assert rc == 1 and "no search or domain entry" in one_error_line(err)


def test_nameserver_from_resolv_conf(lab, tmp_path):
    """Without --server: the first nameserver, port 53 (nothing listens there in dpt-r)."""
    conf = tmp_path / "resolv.conf"
    conf.write_text("# test\nnameserver 127.0.0.1\nnameserver 192.0.2.99\n")
    rc, out, err = cli("--resolv-conf", str(conf), "_ipp._tcp", L.ZONE1, server=None)
    assert rc == 5, (rc, out, err)
    assert "127.0.0.1:53: connection refused" in one_error_line(err)


def test_refused_names_the_domain(lab):
    rc, out, err = cli("_ipp._tcp", "example.org.")
    assert rc == 3, (rc, out, err)
    line = one_error_line(err)
    assert "REFUSED" in line and "example.org." in line, line


def test_timeout_says_how_long_and_which_server(lab):
    """A UDP port that receives but never answers."""
    with L.netns(L.NS_R):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        t0 = time.monotonic()
        rc, out, err = cli("--timeout", "2", "_ipp._tcp", L.ZONE1, server="127.0.0.1:%d" % port)
        elapsed = time.monotonic() - t0
    finally:
        s.close()
    assert rc == 4, (rc, out, err)
    line = one_error_line(err)
    assert "timeout" in line and "after 2 s" in line and "127.0.0.1:%d" % port in line, line
    assert 1.9 < elapsed < 6


def test_connection_refused(lab):
    rc, out, err = cli("_ipp._tcp", L.ZONE1, server="127.0.0.1:5399")
    assert rc == 5, (rc, out, err)
    assert "127.0.0.1:5399: connection refused" in one_error_line(err)
    rc, out, err = cli("--tcp", "_ipp._tcp", L.ZONE1, server="127.0.0.1:5399")
    assert rc == 5 and "connection refused" in one_error_line(err)


def test_unreachable(lab):
    """dpt-r has no route to 203.0.113.0/24 (documentation range)."""
    rc, out, err = cli("--timeout", "3", "_ipp._tcp", L.ZONE1, server="203.0.113.1")
    assert rc == 5, (rc, out, err)
    assert "unreachable" in one_error_line(err)


@pytest.mark.parametrize("args,part", [
    (["_ipp._tcp", "a..b"], 'empty label after "a"'),
    (["_ipp._tcp", ".lab1.example."], "starts with a dot"),
    (["ipp._tcp", "lab1.example."], "must start with an underscore"),
    (["--resolve", "x" * 64, "_ipp._tcp", "lab1.example."], "64 octets"),
    (["_ipp._tcp", "lab1.example."], None),
], ids=["double-dot", "leading-dot", "type", "long-instance", "bad-server"])
def test_malformed_input(lab, args, part):
    server = SERVER if part else "lab-host:5300"
    rc, out, err = cli(*args, server=server)
    assert rc == 2, (rc, out, err)
    line = one_error_line(err)
    assert (part or "not a numeric") in line, line


def test_help_documents_exit_codes(lab):
    rc, out, err = cli("--help", server=None)
    assert rc == 0
    for code in ("0  success", "1  not found", "2  malformed", "3  the server", "4  timeout", "5  network"):
        assert code in out, out


def _reader(proc, q):
    for line in iter(proc.stdout.readline, ""):
        q.put(line.rstrip("\n"))
    q.put(None)


def _wait_line(q, pred, timeout, seen):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = q.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if pred(line):
            return line
    return None


def test_watch_shows_adds_and_removes(lab):
    """--watch polls every TTL (≥ 5 s): a service published on the far link during
    the watch shows as a '+' line, its removal (mDNS goodbye) as a '-' line."""
    stype = "_cliwatch%d._tcp" % (os.getpid() % 1000)
    cmd = ["ip", "netns", "exec", L.NS_R, cli_bin(), "--server", SERVER, "--watch", "--duration", "60",
           stype, L.ZONE1]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    q = queue.Queue()
    threading.Thread(target=_reader, args=(proc, q), daemon=True).start()
    seen = []
    paths = []
    try:
        assert _wait_line(q, lambda s: s.startswith("A/R Time"), 10, seen), seen
        time.sleep(7)  # first poll: the proxy's browse starts (6 s miss)
        paths = lab.add_far_services("avahi-l1", [("CLI Watch", stype, 7100, [], [b"w=1"])], "cliwatch")
        added = _wait_line(q, lambda s: s.startswith("+") and s.endswith("CLI Watch"), 30, seen)
        assert added, "no + line; output so far: %r" % seen
        assert "lab1.example." in added and stype + "." in added
        lab.remove_far_services(paths)
        paths = []
        removed = _wait_line(q, lambda s: s.startswith("-") and s.endswith("CLI Watch"), 30, seen)
        assert removed, "no - line; output so far: %r" % seen
    finally:
        lab.remove_far_services(paths)
        if proc.poll() is None:
            proc.terminate()
        proc.wait(10)


def test_watch_json_is_bounded_by_count(lab):
    rc, out, err = cli_until(lambda rc, o, e: "Printer One" in o, "--watch", "--json", "--count", "1",
                             "_ipp._tcp", L.ZONE1)
    assert rc == 0, err
    events = [json.loads(line) for line in out.splitlines()]
    assert events and all(list(e)[:2] == ["event", "time"] and e["event"] == "add" for e in events)
    assert "Printer One" in {e["name"] for e in events}
