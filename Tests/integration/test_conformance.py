"""Conformance judged by tools we did not write, in the resolver lab (resolver_lab.py).

* zonemaster-cli (the Zonemaster engine, Debian's package; every test module, default
  profile, IPv4 and IPv6) tests each link zone, link 1's host zone and a reverse zone as a
  registry tests a delegation, from the client namespace with root hints that make the
  lab's knotd the root.
* dnsviz probe (authoritative analysis from the lab's root, EDNS diagnostics on) of the
  same zones and of a few names in them (DNSVIZ_NAMES), then dnsviz grok.
* An EDNS compliance run in the manner of ISC's EDNS compliance tester (genreport:
  dns, aa, ad, cd, ra, rd, tc, zflag, opcode, opcodeflg, type666, tcp, edns, edns1,
  edns@512, ednsopt, edns1opt, do, docd, edns1do, ednsflags, optlist, ednsnsid,
  ednscookie, ednsexpire, ednssubnet, edns1nsid, edns1cookie, ednstcp and its TYPE tests;
  plus docookie, bufsize (a >512-byte answer with EDNS size 512, without EDNS, over TCP),
  AXFR and IXFR), sent with dnspython to the proxy and to a Knot DNS server (the
  reference) that serves a copy of lab2.example. (its SOA and NS, and the 64 `_bulk._tcp`
  PTRs of link 2), over IPv4 and IPv6, compared field by field.

The rule for every tool: a message at WARNING or above (zonemaster: WARNING, ERROR,
CRITICAL; dnsviz: warnings and errors; the EDNS run: any field where the proxy answers
unlike Knot) is either absent or listed below with its reason. Reasons are of two kinds:
"lab" (documentation addresses, one router hence one name server, no real root, no
mail, ...) and "RFC 8766" (the proxy does what the Discovery Proxy specification says
where the tool's general advice differs). A proxy bug is never listed: it fails the test.
(The first run found two, since fixed: the DO bit was not copied, RFC 3225 §3, and AXFR got
a lone SOA instead of REFUSED, RFC 5936 §2.2.1; zonemaster's AXFR_AVAILABLE is judged at any
level for that reason.)

Every tool runs in the client namespace (NS_C), which has no route out of the lab
(checked before each run), against the lab's knotd as the root: nothing leaves the lab.

The verdicts (counts by level, tags, the EDNS table) are printed (pytest -s) and written
to $CONFORMANCE_REPORT (default /tmp/conformance-report.md) for the docs.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import time

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype as T
import dns.rrset
import dns.version
import pytest

import lab as L
import resolver_lab as RL

BULK = BULK_NAME = "_bulk._tcp." + L.ZONE2        # 64 PTRs: an answer > 512 bytes
LINK_ZONES = (L.ZONE1, L.ZONE2)
HOST_ZONE = "lab1-hosts.example."                # link 1's host-name zone (RFC 8766 §5.3)
REVERSE_ZONE = "2.0.192.in-addr.arpa."          # link 1's subnet 192.0.2.0/24
ZONES = LINK_ZONES + (HOST_ZONE, REVERSE_ZONE)
# dnsviz also analyses names inside the zones (each judged with its zone): browse-domain
# enumeration, a service type, an instance, the big browse, a host, a reverse address
DNSVIZ_NAMES = ZONES + ("b._dns-sd._udp." + L.ZONE1, "_services._dns-sd._udp." + L.ZONE1,
                        "_ipp._tcp." + L.ZONE1, "Printer\\032One._ipp._tcp." + L.ZONE1, BULK_NAME,
                        "farhost1." + HOST_ZONE, "10." + REVERSE_ZONE)
PROXY = RL.R_V4_C                                # the proxy as delegated (ns.example.)
KNOT_REF_ADDR, KNOT_REF_ADDR6 = "127.0.0.3", "::1"   # the reference Knot DNS, in NS_C
REF_ZONE = L.ZONE2                               # the zone both serve for the EDNS run
TOOL_TIMEOUT = 150                               # seconds, for one tool run
REPORT_PATH = os.environ.get("CONFORMANCE_REPORT", "/tmp/conformance-report.md")

# --------------------------------------------------------------------------
# What is allowed, and why
# --------------------------------------------------------------------------

LAB_ONE_NS = ("lab: one router, hence one Discovery Proxy and one name server (ns.example.) "
              "for each zone; RFC 8766 §6.2 lists several only when a link has several "
              "proxies (campus_ha_lab.py has two)")
LAB_DOC_ADDR = ("lab: ns.example. is 203.0.113.1 / 2001:db8:3::1, documentation ranges "
                "(RFC 5737, RFC 3849), as is every address of the lab")
LAB_SOA_TIMERS = ("RFC 8766 §6.1: zone transfers are undefined for Discovery Proxy zones; "
                  "it RECOMMENDS REFRESH 7200, RETRY 3600, EXPIRE 86400 and MINIMUM 10, below "
                  "Zonemaster's defaults for zones with secondaries")

# zonemaster-cli: tag -> reason (WARNING and above must be absent or listed)
ZONEMASTER_ALLOWED = {
    "NAMESERVER_IP_PRIVATE_NETWORK": LAB_DOC_ADDR,
    "NAMESERVER_IP_WITHOUT_REVERSE": (
        "lab: the lab's in-addr.arpa./ip6.arpa. have no reverse zone for the client link "
        "203.0.113.0/24 (not a proxy link), so ns.example.'s address has no PTR"),
    "NOT_ENOUGH_NS_DEL": LAB_ONE_NS,
    "NOT_ENOUGH_NS_CHILD": LAB_ONE_NS,
    "NOT_ENOUGH_IPV4_NS_DEL": LAB_ONE_NS,
    "NOT_ENOUGH_IPV4_NS_CHILD": LAB_ONE_NS,
    "NOT_ENOUGH_IPV6_NS_DEL": LAB_ONE_NS,
    "NOT_ENOUGH_IPV6_NS_CHILD": LAB_ONE_NS,
    "EXPIRE_MINIMUM_VALUE_LOWER": LAB_SOA_TIMERS,
}
# Tags judged at any level: below WARNING, but a proxy that logs them is wrong
# (RFC 8766 §6.1: zone transfers are undefined for Discovery Proxy zones; NAMESERVER03 logs
# AXFR_AVAILABLE at NOTICE when an AXFR reply starts with the SOA).
# NO_RESPONSE (DEBUG): a query of the run that the proxy left unanswered.
ZONEMASTER_JUDGED_ANY_LEVEL = {"AXFR_AVAILABLE", "NO_RESPONSE"}

# dnsviz grok: code -> reason (none needed: the lab's zones give no error or warning)
DNSVIZ_ALLOWED = {}
# dnsviz 0.9 does not check that a reply echoes DO, and does not try AXFR: the EDNS run
# below covers both.

# The EDNS run: (test, field) -> reason for answering unlike Knot ("*" = every test)
CD_COPIED = ("RFC 4035 §3.1.6: the name server side MUST copy the CD bit from a query to its "
             "response; the proxy does, Knot 3.2 clears it")
NSID_NOT_SENT = ("RFC 5001 §2.1: NSID is optional (a server MAY answer it; one that does not "
                 "ignores the option); Knot sends its host name by default, the proxy has no NSID")
EXPIRE_NOT_SENT = ("RFC 7314 §2 (EXPIRE) is about zone transfers, which are undefined for "
                   "Discovery Proxy zones (RFC 8766 §6.1): the proxy ignores the option")
EDNS_ALLOWED = {
    ("cd", "flags"): CD_COPIED,
    ("docd", "flags"): CD_COPIED,
    ("opcodeflg", "flags"): CD_COPIED + " (here in a NOTIMP reply, as Knot copies RD)",
    ("ednsnsid", "opts"): NSID_NOT_SENT,
    ("edns1nsid", "opts"): NSID_NOT_SENT,
    ("optlist", "opts"): NSID_NOT_SENT + "; " + EXPIRE_NOT_SENT,
    ("ednsexpire", "opts"): EXPIRE_NOT_SENT,
    ("axfr", "rcode"): ("both refuse the transfer (RFC 8766 §6.1: undefined for these zones); Knot "
                        "answers a transfer its ACL denies with NOTAUTH, the proxy with REFUSED, "
                        "the RCODE RFC 1035 §4.1.1 names for a refused zone transfer"),
    ("ixfr", "rcode"): "as for axfr (RFC 1995 §2: IXFR is refused like AXFR)",
    ("NSEC", "an"): ("RFC 8766 §5.5.3: an NSEC query is answered with one synthesized NSEC for "
                     "the name (its type bitmap); Knot's zone is unsigned and has none"),
    ("ANY", "an"): ("RFC 8482 §4: a responder may answer ANY conventionally (the proxy: the apex "
                    "SOA and NS) or with a subset (Knot: one RRset)"),
}

# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------


class Report:
    """Verdict summaries for the docs: printed as they come (pytest -s) and the whole
    report rewritten to REPORT_PATH each time, so a partial run leaves a partial report."""

    def __init__(self, path=REPORT_PATH):
        self.path = path
        self.head = []
        self.sections = []   # [(title, markdown)]

    def header(self, lines):
        self.head = list(lines)
        self._write()

    def add(self, title, text):
        self.sections = [s for s in self.sections if s[0] != title] + [(title, text.rstrip())]
        print("\n==== %s ====\n%s\n" % (title, text.rstrip()))
        self._write()

    def text(self):
        out = ["# Conformance report (Tests/integration/test_conformance.py)", ""] + self.head + [""]
        for title, body in self.sections:
            out += ["## " + title, "", body, ""]
        return "\n".join(out)

    def _write(self):
        try:
            with open(self.path, "w") as f:
                f.write(self.text())
        except OSError as e:  # the report is a by-product: never fail a test for it
            print("(could not write %s: %s)" % (self.path, e))


REPORT = Report()


def md_table(header, rows):
    """A Markdown table (cells are str()-ed, '|' escaped)."""
    def cell(v):
        return str(v).replace("|", "\\|").replace("\n", " ")
    lines = ["| " + " | ".join(cell(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


class Verdicts:
    """Findings of one tool run, each classified: ("allowed", reason) or ("BUG", None);
    then the outcome of the test."""

    def __init__(self, what):
        self.what = what
        self.items = []   # (level, key, detail, kind, note)

    def add(self, level, key, detail, allowed=None):
        if allowed:
            self.items.append((level, key, detail, "allowed", allowed))
        else:
            self.items.append((level, key, detail, "BUG", ""))

    def bugs(self):
        return [i for i in self.items if i[3] == "BUG"]

    def verdict_text(self, kind, note):
        if kind == "allowed":
            return "allowed: " + note
        return "**PROXY BUG**"

    def conclude(self):
        """Fail on findings that are not allowed; else pass."""
        bugs = self.bugs()
        if bugs:
            pytest.fail("%s: %d finding(s) not allowed:\n%s" % (
                self.what, len(bugs), "\n".join("  %s %s: %s" % (lv, k, d) for lv, k, d, _, _ in bugs)))


# --------------------------------------------------------------------------
# The lab side: fixture, guard, helpers
# --------------------------------------------------------------------------


def assert_isolated():
    """NS_C has no default route (IPv4 or IPv6): a tool run there cannot leave the lab."""
    for fam in ("-4", "-6"):
        out = L.nsrun(RL.NS_C, ["ip", fam, "route", "show", "default"]).stdout.strip()
        assert not out, "%s has a default route (%s): refusing to run outside tools" % (RL.NS_C, out)


def ns_exec(cmd, timeout=TOOL_TIMEOUT):
    """Run `cmd` in NS_C, bounded (timeout(1) kills it; the Python side waits a bit more)."""
    assert_isolated()
    t0 = time.monotonic()
    r = subprocess.run(["ip", "netns", "exec", RL.NS_C, "timeout", "-k", "5", str(timeout)] + list(cmd),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout + 20)
    return r, time.monotonic() - t0


def tool_version(cmd):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
        return r.stdout.strip().splitlines()[0] if r.stdout.strip() else "?"
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def dpkg_version(pkg):
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True)
    return r.stdout.strip() or "not installed"


def exchange(addr, wire, tcp=False, timeout=4.0, port=53, more=False):
    """Send `wire` from NS_C to addr:port; return the reply's bytes (None on timeout).
    Over TCP with `more`, a list of every message until the server stops sending."""
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with L.netns(RL.NS_C):
        s = socket.socket(fam, socket.SOCK_STREAM if tcp else socket.SOCK_DGRAM)
    try:
        s.settimeout(timeout)
        if not tcp:
            s.sendto(wire, (addr, port))
            try:
                return s.recvfrom(65535)[0]
            except socket.timeout:
                return None
        s.connect((addr, port))
        s.sendall(struct.pack(">H", len(wire)) + wire)
        msgs = []
        while True:
            try:
                head = _recv(s, 2)
                if head is None:
                    break
                body = _recv(s, struct.unpack(">H", head)[0])
                if body is None:
                    break
                msgs.append(body)
            except (socket.timeout, ConnectionError):
                break
            if not more:
                break
            s.settimeout(1.0)   # further messages of a transfer come at once
        return msgs if more else (msgs[0] if msgs else None)
    finally:
        s.close()


def _recv(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


class Conformance:
    """What the tests share: the resolver lab with the proxy as a site configures it, the
    root hints, the reference Knot, and the proxy's version."""

    def __init__(self, rlab):
        self.rlab = rlab
        self.dir = os.path.join(rlab.dir, "conformance")
        os.makedirs(self.dir, exist_ok=True)
        self.hints = os.path.join(self.dir, "root.hints")
        RL.write_file(self.hints, RL.fmt(RL.ROOT_HINTS, self.dir))
        self.dnsviz_probe = None    # (path, stderr, seconds) once probed

    def query_proxy(self, qname, rdtype, tcp=True, timeout=10.0):
        q = dns.message.make_query(qname, rdtype, use_edns=0, payload=1232)
        q.flags &= ~dns.flags.RD
        wire = exchange(PROXY, q.to_wire(), tcp=tcp, timeout=timeout)
        assert wire is not None, "no answer from the proxy to %s %s" % (qname, T.to_text(rdtype))
        return dns.message.from_wire(wire)

    def warm_bulk(self, timeout=20.0):
        """Browse link 2's 64 `_bulk._tcp` instances on the proxy until all are there;
        return the PTR rdata texts."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.query_proxy(BULK, T.PTR)
            targets = sorted({rd.target.to_text() for rs in r.answer if rs.rdtype == T.PTR for rd in rs})
            if len(targets) >= L.BULK_COUNT or time.monotonic() > deadline:
                return targets
            time.sleep(0.5)

    def start_knot_ref(self):
        """Knot DNS in NS_C on KNOT_REF_ADDR serving a copy of REF_ZONE taken from the
        proxy: the apex SOA and NS as the proxy gives them, and the `_bulk._tcp` PTRs."""
        soa = self.query_proxy(REF_ZONE, T.SOA).find_rrset(
            dns.message.ANSWER, dns.name.from_text(REF_ZONE), dns.rdataclass.IN, T.SOA)
        ns = self.query_proxy(REF_ZONE, T.NS).find_rrset(
            dns.message.ANSWER, dns.name.from_text(REF_ZONE), dns.rdataclass.IN, T.NS)
        bulk = self.warm_bulk()
        assert len(bulk) >= L.BULK_COUNT, "the proxy lists %d of %d _bulk._tcp instances" % (
            len(bulk), L.BULK_COUNT)
        d = os.path.join(self.dir, "knot-ref")
        lines = ["$TTL 10", "%s SOA %s" % (REF_ZONE, soa[0].to_text())]
        lines += ["%s NS %s" % (REF_ZONE, rd.to_text()) for rd in ns]
        lines += ["%s PTR %s" % (BULK, t) for t in bulk]
        RL.write_file(os.path.join(d, "ref.zone"), "\n".join(lines) + "\n")
        RL.write_file(os.path.join(d, "knot.conf"),
                      RL.knot_conf(d, [KNOT_REF_ADDR, KNOT_REF_ADDR6], {REF_ZONE: "ref.zone"}))
        self.rlab.lab.spawn(RL.NS_C, ["knotd", "-c", os.path.join(d, "knot.conf")], "knotd-ref")

        def answers():
            self.rlab.lab.check_alive("knotd-ref")
            q = dns.message.make_query(REF_ZONE, T.SOA)
            w = exchange(KNOT_REF_ADDR, q.to_wire(), timeout=1)
            return w is not None and dns.message.from_wire(w).answer
        L.wait_for(answers, 15, what="the reference knotd to serve %s" % REF_ZONE)

    def stop(self):
        self.rlab.lab.stop_proc("knotd-ref")


@pytest.fixture(scope="module")
def conf(rlab):
    for tool in ("zonemaster-cli", "dnsviz", "knotd"):
        if shutil.which(tool) is None:
            pytest.skip("%s is not installed (scripts/test.sh installs it)" % tool)
    assert REVERSE_ZONE in RL.reverse_zones(rlab.records), rlab.records
    # The proxy as the parent zone was printed for (link 1 with its host zone): every
    # delegation in the lab's example. then has a serving proxy.
    rlab.restart_proxy(extra_args=["--config", rlab.parent_zone_config()], links=False)
    c = Conformance(rlab)
    binary = L.Lab.proxy_bin()
    REPORT.header([
        "- proxy: `%s` (%s)" % (binary, tool_version([binary, "--version"])),
        "- zonemaster-cli %s (engine libzonemaster-perl %s), dnsviz %s, Knot DNS %s, dnspython %s" % (
            dpkg_version("zonemaster-cli"), dpkg_version("libzonemaster-perl"), dpkg_version("dnsviz"),
            dpkg_version("knot"), dns.version.version),
        "- lab: resolver lab (resolver_lab.py), proxy `ns.example.` = %s / %s port 53, root = knotd %s"
        % (RL.R_V4_C, RL.R_V6_C, RL.KNOT_ADDR),
        "- date: %s" % time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    ])
    try:
        c.start_knot_ref()
        yield c
    finally:
        c.stop()
        print("\n(conformance report written to %s)" % REPORT.path)


# --------------------------------------------------------------------------
# zonemaster-cli
# --------------------------------------------------------------------------


def run_zonemaster(conf, zone):
    """zonemaster-cli on `zone` from NS_C with the lab's root; the messages (dicts with
    level, tag, module, testcase, args) and the run's seconds."""
    cmd = ["zonemaster-cli", "--hints", conf.hints, "--ipv4", "--ipv6", "--level", "DEBUG",
           "--json", "--raw", "--no-progress", zone]
    r, secs = ns_exec(cmd)
    try:
        msgs = json.loads(r.stdout)
    except ValueError:
        pytest.fail("zonemaster-cli %s: exit %d, no JSON:\n%s\n%s" % (zone, r.returncode, r.stdout[-3000:],
                                                                      r.stderr[-3000:]))
    return msgs, secs


def zm_detail(m):
    args = m.get("args") or {}
    return "%s %s" % (m.get("testcase", "?"), "; ".join("%s=%s" % kv for kv in sorted(args.items())))


@pytest.mark.parametrize("zone", ZONES)
def test_zonemaster(conf, zone):
    """zonemaster-cli (every test module, default profile, IPv4 and IPv6) on a proxy zone:
    no WARNING, ERROR or CRITICAL message, nor one of ZONEMASTER_JUDGED_ANY_LEVEL, unless
    listed in ZONEMASTER_ALLOWED (lab, RFC 8766)."""
    msgs, secs = run_zonemaster(conf, zone)
    levels = ("CRITICAL", "ERROR", "WARNING", "NOTICE", "INFO", "DEBUG")
    counts = {lv: sum(1 for m in msgs if m.get("level") == lv) for lv in levels}
    v = Verdicts("zonemaster-cli %s" % zone)
    rows = []
    for m in msgs:
        lv, tag = m.get("level"), m.get("tag")
        if lv not in ("CRITICAL", "ERROR", "WARNING") and tag not in ZONEMASTER_JUDGED_ANY_LEVEL:
            continue
        v.add(lv, tag, zm_detail(m), allowed=ZONEMASTER_ALLOWED.get(tag))
        _, _, _, kind, note = v.items[-1]
        rows.append((lv, tag, zm_detail(m), v.verdict_text(kind, note)))
    notices = sorted({m["tag"] for m in msgs if m.get("level") == "NOTICE"} - ZONEMASTER_JUDGED_ANY_LEVEL)
    infos = sorted({m["tag"] for m in msgs if m.get("level") == "INFO"})
    text = "%.1f s; messages by level: %s\n\n" % (secs, ", ".join("%s %d" % (lv, counts[lv]) for lv in levels))
    text += md_table(("level", "tag", "details", "verdict"), rows) if rows else "(no WARNING or above)"
    text += "\n\nNOTICE tags (not judged): %s" % (", ".join(notices) or "none")
    text += "\n\nINFO tags: %s" % (", ".join(infos) or "none")
    REPORT.add("zonemaster-cli %s" % zone, text)
    assert counts["INFO"] > 0, "zonemaster-cli ran no test on %s:\n%s" % (zone, msgs)
    v.conclude()


# --------------------------------------------------------------------------
# dnsviz
# --------------------------------------------------------------------------


def dnsviz_probe(conf):
    """One `dnsviz probe` of ZONES (authoritative analysis from the lab's root, EDNS
    diagnostics), shared by the dnsviz tests; (probe file, grok JSON, seconds)."""
    if conf.dnsviz_probe is None:
        out = os.path.join(conf.dir, "dnsviz-probe.json")
        cmd = ["dnsviz", "probe", "-A", "-E", "-x", ".:%s=%s" % (RL.ROOT_NS, RL.KNOT_ADDR),
               "-o", out] + list(DNSVIZ_NAMES)
        r, secs = ns_exec(cmd)
        assert r.returncode == 0 and os.path.getsize(out) > 0, "dnsviz probe: exit %d\n%s" % (
            r.returncode, r.stderr[-3000:])
        g, _ = ns_exec(["dnsviz", "grok", "-r", out, "-l", "info"])  # all, judged below
        assert g.returncode == 0, "dnsviz grok: exit %d\n%s" % (g.returncode, g.stderr[-3000:])
        p, _ = ns_exec(["dnsviz", "print", "-r", out])
        conf.dnsviz_probe = (out, json.loads(g.stdout), secs, r.stderr, p.stdout)
    return conf.dnsviz_probe


def grok_findings(obj, path=()):
    """(level, path, item) for every error and warning anywhere in grok's JSON."""
    if isinstance(obj, dict):
        for k, val in obj.items():
            if k in ("errors", "error", "warnings", "warning") and isinstance(val, list):
                lv = "ERROR" if k.startswith("error") else "WARNING"
                for item in val:
                    yield lv, "/".join(path), item
            else:
                yield from grok_findings(val, path + (str(k),))
    elif isinstance(obj, list):
        for i, val in enumerate(obj):
            yield from grok_findings(val, path)


@pytest.mark.parametrize("zone", ZONES)
def test_dnsviz(conf, zone):
    """dnsviz grok of the probe, for one zone and the names probed in it: no error or
    warning unless listed in DNSVIZ_ALLOWED (lab)."""
    _out, grok, secs, err, printed = dnsviz_probe(conf)
    assert zone in grok, "dnsviz analysed no %s; names: %s" % (zone, list(grok))
    zname = dns.name.from_text(zone)
    names = [n for n in grok if dns.name.from_text(n).is_subdomain(zname)]
    missing = [n for n in DNSVIZ_NAMES if dns.name.from_text(n).is_subdomain(zname)
               and dns.name.from_text(n).to_text().lower() not in [x.lower() for x in names]]
    assert not missing, "dnsviz did not analyse %s; names: %s" % (missing, list(grok))
    v = Verdicts("dnsviz %s" % zone)
    rows = []
    for lv, path, item in (f for n in names for f in grok_findings(grok[n], (n,))):
        code = item.get("code", "?")
        detail = "%s: %s (servers %s; %s)" % (path, item.get("description", ""),
                                             ",".join(item.get("servers", [])),
                                             ",".join(item.get("query_options", [])))
        v.add(lv, code, detail, allowed=DNSVIZ_ALLOWED.get(code))
        _, _, _, kind, note = v.items[-1]
        rows.append((lv, code, detail, v.verdict_text(kind, note)))
    n_err = sum(1 for r in rows if r[0] == "ERROR")
    text = "probe %.1f s (all names); names analysed: %s; errors %d, warnings %d; status %s\n\n" % (
        secs, " ".join(names), n_err, len(rows) - n_err, grok[zone].get("status", "?"))
    isolated = [ln.strip() for ln in err.splitlines() if "connectivity" in ln]
    if isolated:   # dnsviz's own check that the real root is out of reach
        text += "dnsviz probe says: %s\n\n" % "; ".join(isolated)
    text += md_table(("level", "code", "where / what", "verdict"), rows) if rows else "(no errors or warnings)"
    block, keep = [], False
    for ln in printed.splitlines():   # dnsviz print: a name line, then its indented records
        if not ln.startswith(" "):
            keep = dns.name.from_text(ln.split()[0]).is_subdomain(zname)
        if keep:
            block.append(ln)
    if block:
        text += "\n\n`dnsviz print` of %s:\n\n```\n%s\n```" % (zone, "\n".join(block[:60]))
    REPORT.add("dnsviz %s" % zone, text)
    v.conclude()


# --------------------------------------------------------------------------
# EDNS compliance, proxy vs Knot
# --------------------------------------------------------------------------

AA, TC, RD = 0x0400, 0x0200, 0x0100
RA, Z, AD, CD = 0x0080, 0x0040, 0x0020, 0x0010
HDR_FLAGS = (("qr", 0x8000), ("aa", AA), ("tc", TC), ("rd", RD), ("ra", RA), ("z", Z), ("ad", AD), ("cd", CD))
NSID = (3, b"")
ECS = (8, b"\x00\x01\x00\x00")                  # family 1, source 0, scope 0
EXPIRE = (9, b"")
COOKIE = (10, bytes(range(1, 9)))               # a client cookie 0102030405060708
UNKNOWN_OPT = (100, b"")

# name, query, expectation on the reply (genreport's idea of ok; checked on both servers)
#   query keys: edns (None: no OPT; else the version), payload, do, eflags (other EDNS
#   flags), options, hflags (header flags), opcode, noq (header only), qname, qtype, tcp
EDNS_TESTS = [
    ("dns", dict(), "NOERROR, SOA, no OPT"),
    ("aa", dict(hflags=AA), "NOERROR, SOA"),
    ("ad", dict(hflags=AD), "NOERROR, SOA"),
    ("cd", dict(hflags=CD), "NOERROR, SOA"),
    ("ra", dict(hflags=RA), "NOERROR, SOA"),
    ("rd", dict(hflags=RD), "NOERROR, SOA"),
    ("tc", dict(hflags=TC), "NOERROR, SOA"),
    ("zflag", dict(hflags=Z), "NOERROR, SOA, Z clear"),
    ("opcode", dict(opcode=15, noq=True), "NOTIMP"),
    ("opcodeflg", dict(opcode=15, noq=True, hflags=TC | RD | RA | CD | AD | AA | Z), "NOTIMP"),
    ("type666", dict(qtype=666), "NOERROR, no answer"),
    ("tcp", dict(tcp=True), "NOERROR, SOA"),
    ("edns", dict(edns=0), "NOERROR, SOA, OPT v0"),
    ("edns1", dict(edns=1), "BADVERS, OPT v0, no answer"),
    ("edns@512", dict(edns=0, payload=512, do=True, qtype=T.DNSKEY), "NOERROR, OPT v0, DO"),
    ("ednsopt", dict(edns=0, options=[UNKNOWN_OPT]), "NOERROR, SOA, option 100 not echoed"),
    ("edns1opt", dict(edns=1, options=[UNKNOWN_OPT]), "BADVERS, OPT v0, option 100 not echoed"),
    ("do", dict(edns=0, do=True), "NOERROR, SOA, DO echoed"),
    ("docd", dict(edns=0, do=True, hflags=CD), "NOERROR, SOA, DO echoed"),
    ("edns1do", dict(edns=1, do=True), "BADVERS, OPT v0"),
    ("ednsflags", dict(edns=0, eflags=0x0080), "NOERROR, SOA, flag 0x0080 not echoed"),
    ("optlist", dict(edns=0, options=[NSID, ECS, EXPIRE, COOKIE]), "NOERROR, SOA, OPT v0"),
    ("ednsnsid", dict(edns=0, options=[NSID]), "NOERROR, SOA, OPT v0"),
    ("ednscookie", dict(edns=0, options=[COOKIE]), "NOERROR, SOA, OPT v0"),
    ("docookie", dict(edns=0, do=True, options=[COOKIE]), "NOERROR, SOA, DO echoed"),
    ("ednsexpire", dict(edns=0, options=[EXPIRE]), "NOERROR, SOA, OPT v0"),
    ("ednssubnet", dict(edns=0, options=[ECS]), "NOERROR, SOA, OPT v0"),
    ("edns1nsid", dict(edns=1, options=[NSID]), "BADVERS, OPT v0"),
    ("edns1cookie", dict(edns=1, options=[COOKIE]), "BADVERS, OPT v0"),
    ("ednstcp", dict(edns=0, payload=512, do=True, qtype=T.DNSKEY, tcp=True), "NOERROR, OPT v0, DO"),
    ("bufsize", dict(edns=0, payload=512, qname=BULK, qtype=T.PTR), "TC=1, <= 512 bytes, OPT v0"),
    ("bufsize-noedns", dict(qname=BULK, qtype=T.PTR), "TC=1, <= 512 bytes, no OPT"),
    ("bufsize-tcp", dict(edns=0, payload=512, qname=BULK, qtype=T.PTR, tcp=True), "TC=0, 64 PTRs"),
    ("axfr", dict(qtype=T.AXFR, tcp=True), "REFUSED (or NOTAUTH), one message"),
    ("ixfr", dict(qtype=T.IXFR, tcp=True), "REFUSED (or NOTAUTH), one message"),
]


def build_query(spec, msg_id):
    """The wire of one EDNS test query (RD clear unless the test sets it)."""
    qname = dns.name.from_text(spec.get("qname", REF_ZONE))
    if spec.get("noq"):
        flags = spec.get("hflags", 0) | (spec.get("opcode", 0) << 11)
        return struct.pack(">HHHHHH", msg_id, flags, 0, 0, 0, 0)
    qtype = spec.get("qtype", T.SOA)
    q = dns.message.make_query(qname, qtype, id=msg_id, use_edns=False)
    if qtype == T.IXFR:
        soa = dns.rrset.from_text(qname, 0, dns.rdataclass.IN, T.SOA,
                                  "ns.example. hostmaster.example. 0 0 0 0 0")
        q.authority.append(soa)
    wire = bytearray(q.to_wire())
    flags = spec.get("hflags", 0) | (spec.get("opcode", 0) << 11)
    struct.pack_into(">H", wire, 2, flags)
    edns = spec.get("edns")
    if edns is not None:
        # the OPT record by hand (RFC 6891 §6.1.2-§6.1.3), so that every bit is as the test says
        rdata = b"".join(struct.pack(">HH", c, len(d)) + d for c, d in spec.get("options", []))
        eflags = (0x8000 if spec.get("do") else 0) | spec.get("eflags", 0)
        wire += b"\x00" + struct.pack(">HHBBHH", T.OPT, spec.get("payload", 4096), 0, edns, eflags,
                                      len(rdata)) + rdata
        struct.pack_into(">H", wire, 10, struct.unpack(">H", wire[10:12])[0] + 1)
    return bytes(wire)


def features(spec, wire):
    """The compared fields of a reply (None: no reply within the timeout)."""
    if not wire:
        return {"rcode": "TIMEOUT"}
    msgs = wire if isinstance(wire, list) else [wire]
    first = msgs[0]
    _id, fl, qd, an, _ns, _ar = struct.unpack(">HHHHHH", first[:12])
    f = {"opcode": (fl >> 11) & 0xF, "flags": " ".join(n for n, b in HDR_FLAGS if fl & b) or "-",
         "qd": qd, "an": an, "size": len(first), "msgs": len(msgs)}
    parsable = bytearray(first)
    parsable[2] &= 0x87   # opcode 0 for dnspython, which knows no opcode 15 (kept in f)
    try:
        m = dns.message.from_wire(bytes(parsable), ignore_trailing=True)
    except Exception as e:  # noqa: BLE001 - shown in the table
        f.update(rcode="%s (unparsed: %s)" % (dns.rcode.to_text(fl & 0xF), type(e).__name__),
                 opt="?", do="?", eflags="?", opts="?")
        return f
    f["rcode"] = dns.rcode.to_text(m.rcode())
    if m.opt is None:
        f.update(opt="-", do="-", eflags="-", opts="-")
    else:
        f.update(opt="v%d" % m.edns, do=bool(m.ednsflags & dns.flags.DO),
                 eflags="0x%04x" % (m.ednsflags & 0x7FFF),
                 opts=",".join(str(int(o.otype)) for o in m.options) or "-")
    return f


COMPARED = ("rcode", "opcode", "flags", "qd", "an", "opt", "do", "eflags", "opts", "msgs")


def expectation_problems(name, spec, f):
    """genreport's idea of a correct reply, as (field, text) problems (empty: fine)."""
    p = []
    if f.get("rcode") == "TIMEOUT":
        return [("rcode", "no reply")]
    want_rcode = ("NOTIMP" if spec.get("opcode") else "BADVERS" if spec.get("edns", 0) >= 1
                  else "REFUSED|NOTAUTH" if spec.get("qtype") in (T.AXFR, T.IXFR) else "NOERROR")
    if f["rcode"] not in want_rcode.split("|"):
        p.append(("rcode", "%s, want %s" % (f["rcode"], want_rcode)))
    if "z" in f["flags"].split():
        p.append(("flags", "Z set in the reply (RFC 1035 §4.1.1: must be zero)"))
    if spec.get("qtype") in (T.AXFR, T.IXFR) and f["msgs"] != 1:
        p.append(("msgs", "%d messages" % f["msgs"]))
    if spec.get("noq") or spec.get("qtype") in (T.AXFR, T.IXFR):
        return p
    if spec.get("edns") is None:
        if f["opt"] != "-":
            p.append(("opt", "OPT in the reply to a query without (RFC 6891 §7)"))
    else:
        if f["opt"] != "v0":
            p.append(("opt", "OPT %s, want v0 (RFC 6891 §6.1.3)" % f["opt"]))
        if spec.get("do") and f["do"] is not True:
            p.append(("do", "DO not echoed (RFC 3225 §3)"))
        if f["eflags"] not in ("0x0000", "-"):
            p.append(("eflags", "unknown EDNS flags echoed: %s (RFC 6891 §6.1.4)" % f["eflags"]))
        if "100" in str(f["opts"]).split(","):
            p.append(("opts", "unknown option 100 echoed (RFC 6891 §6.1.2)"))
    if spec.get("edns", 0) >= 1 and f["an"]:
        p.append(("an", "answers in a BADVERS reply"))
    if name.startswith("bufsize") and not spec.get("tcp"):
        if "tc" not in f["flags"].split():
            p.append(("flags", "TC clear although the answer is over 512 bytes"))
        if f["size"] > 512:
            p.append(("size", "%d bytes > 512" % f["size"]))
    if name == "bufsize-tcp" and f["an"] < L.BULK_COUNT:
        p.append(("an", "%d PTRs over TCP, want %d" % (f["an"], L.BULK_COUNT)))
    return p


def cell(f):
    if f.get("rcode") == "TIMEOUT":
        return "TIMEOUT"
    s = "%s %s" % (f["rcode"], f["flags"])
    if f["opcode"]:
        s += " op%d" % f["opcode"]
    s += " qd%d an%d" % (f["qd"], f["an"])
    if f["opt"] != "-":
        s += " OPT %s do=%d eflags=%s opts=%s" % (f["opt"], f["do"] is True, f["eflags"], f["opts"])
    else:
        s += " noOPT"
    s += " %dB" % f["size"]
    if f["msgs"] != 1:
        s += " %dmsgs" % f["msgs"]
    return s


# genreport's TYPE tests: the apex of the zone, one query per type, no EDNS (plus ANY)
TYPE_TESTS = ["A", "NS", "MD", "MF", "CNAME", "SOA", "MB", "MG", "MR", "NULL", "WKS", "PTR", "HINFO",
              "MINFO", "MX", "TXT", "RP", "AFSDB", "X25", "ISDN", "RT", "NSAP", "NSAP-PTR", "SIG",
              "KEY", "PX", "GPOS", "AAAA", "LOC", "NXT", "SRV", "NAPTR", "KX", "CERT", "A6", "DNAME",
              "APL", "DS", "SSHFP", "IPSECKEY", "RRSIG", "NSEC", "DNSKEY", "DHCID", "NSEC3",
              "NSEC3PARAM", "TLSA", "HIP", "CDS", "CDNSKEY", "OPENPGPKEY", "SPF", "NID", "L32",
              "L64", "LP", "EUI48", "EUI64", "URI", "CAA", "ANY"]
APEX_AT_ONCE = 0.6   # s: RFC 8766 §6.3 immediate apex answers (the mDNS wait is 0.8 s)


def compare(v, name, spec, fp, fk):
    """Judge one proxy reply against Knot's (and genreport's expectations): the verdict texts."""
    verdicts = []
    both_tc = "tc" in str(fp.get("flags")).split() and "tc" in str(fk.get("flags")).split()
    for field in COMPARED:
        if field == "an" and both_tc:
            continue   # what a truncated reply keeps is the server's choice (RFC 2181 §9)
        if fp.get(field) == fk.get(field):
            continue
        detail = "%s: %s=%s, Knot %s" % (name, field, fp.get(field), fk.get(field))
        allowed = EDNS_ALLOWED.get((name, field)) or EDNS_ALLOWED.get(("*", field))
        v.add("DIFF", "%s/%s" % (name, field), detail, allowed=allowed)
        verdicts.append(v.verdict_text(*v.items[-1][3:]).replace("**", "") + " [%s]" % field)
    for field, text in expectation_problems(name, spec, fp):
        key = "%s/%s" % (name, field)
        if any(it[1] == key for it in v.items):
            continue   # already judged as a difference from Knot
        v.add("EXPECT", key, "%s: %s" % (name, text), allowed=EDNS_ALLOWED.get((name, field)))
        verdicts.append(v.verdict_text(*v.items[-1][3:]).replace("**", "") + " [%s: %s]" % (field, text))
    return verdicts


def ask(addr, spec, wire):
    xfr = spec.get("qtype") in (T.AXFR, T.IXFR)
    t0 = time.monotonic()
    f = features(spec, exchange(addr, wire, tcp=spec.get("tcp", False), more=xfr))
    f["secs"] = time.monotonic() - t0
    return f


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_edns_compliance_vs_knot(conf, family):
    """The EDNS compliance run (EDNS_TESTS, then TYPE_TESTS at the apex) against the proxy
    and the reference Knot, over IPv4 or IPv6: each compared field (COMPARED) is the same,
    or the difference is listed in EDNS_ALLOWED; genreport's
    expectations hold on the proxy; apex answers come at once (RFC 8766 §6.3)."""
    proxy, knot = (PROXY, KNOT_REF_ADDR) if family == "ipv4" else (RL.R_V6_C, KNOT_REF_ADDR6)
    conf.warm_bulk()
    v = Verdicts("EDNS compliance vs Knot (%s)" % family)
    rows, knot_problems = [], []
    for i, (name, spec, expect) in enumerate(EDNS_TESTS):
        wire = build_query(spec, 0x4000 + i)
        fp, fk = ask(proxy, spec, wire), ask(knot, spec, wire)
        verdicts = compare(v, name, spec, fp, fk)
        knot_problems += ["%s: %s" % (name, text) for _f, text in expectation_problems(name, spec, fk)]
        rows.append((name, expect, cell(fp), cell(fk), "; ".join(verdicts) or "same"))
    text = md_table(("test", "genreport expects", "proxy", "Knot %s" % dpkg_version("knot"), "verdict"), rows)
    if knot_problems:
        text += "\n\nKnot itself misses these expectations (the expectation, not the proxy, is " \
                "then in question):\n" + "\n".join("- " + p for p in knot_problems)
    # genreport's TYPE tests: only the types where the proxy differs are shown
    type_rows, same, slow = [], [], []
    for i, tname in enumerate(TYPE_TESTS):
        spec = dict(qtype=T.from_text(tname))
        wire = build_query(spec, 0x5000 + i)
        fp, fk = ask(proxy, spec, wire), ask(knot, spec, wire)
        verdicts = compare(v, tname, spec, fp, fk)
        if fp.get("rcode") != "TIMEOUT" and fp["secs"] > APEX_AT_ONCE:
            v.add("SLOW", tname + "/secs", "%s %s: %.2f s" % (REF_ZONE, tname, fp["secs"]))
            verdicts.append("PROXY BUG [%.2f s, not at once: RFC 8766 §6.3]" % fp["secs"])
        if verdicts:
            type_rows.append((tname, cell(fp), cell(fk), "; ".join(verdicts)))
        else:
            same.append(tname)
    text += "\n\ngenreport TYPE tests (%s, no EDNS, RD clear), %d types; answered as Knot does: %s" % (
        REF_ZONE, len(TYPE_TESTS), " ".join(same) or "none")
    if type_rows:
        text += "\n\n" + md_table(("type", "proxy", "Knot", "verdict"), type_rows)
    REPORT.add("EDNS compliance (%s): proxy %s vs Knot %s, zone %s" % (family, proxy, knot, REF_ZONE), text)
    v.conclude()
