"""Security (issue 5): no recursion and no upstream traffic for names outside the
zones, RA never set, the admin endpoint on loopback only by default, and the
daemon running as an unprivileged user after binding port 53 (`--user`).
The client ACL (`allow-clients`, RFC 8766 §9.2) is tested in
test_reload_acl.py::test_client_acl and ::test_default_acl_answers_loopback.
Start-up errors (port in use, permission denied on port 53, unknown interface,
bad user) are one line and a non-zero exit, no backtrace."""

import os
import signal
import socket
import subprocess
import time

import dns.flags
import dns.query
import dns.rcode
import dns.rdatatype as T
import pytest

import lab as L
from helpers import ZONE2, browse_until, make_query, name, ptr_targets, query, rrset
from test_cli import assert_no_backtrace, error_lines, run_proxy

OUTSIDE = [("www.example.com.", T.A), ("example.org.", T.NS), (".", T.NS), ("local.", T.SOA),
           ("printer.local.", T.A), ("1.113.0.203.in-addr.arpa.", T.PTR), ("com.", T.DS),
           ("example.", T.SOA), ("xlab1.example.", T.A)]


def _capture_upstream(lab):
    """tcpdump in dpt-r for anything DNS-like other than the proxy's own port and mDNS."""
    path = os.path.join(lab.dir, "upstream-%d.pcap" % int(time.time() * 1000))
    proc = subprocess.Popen(
        ["ip", "netns", "exec", L.NS_R, "tcpdump", "-i", "any", "-n", "-U", "-w", path,
         "(udp or tcp) and port 53 or (tcp or udp) and not port 5353 and not port %d "
         "and not portrange 5300-5330 and not portrange 8300-8330" % L.PROXY_PORT],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    L.wait_for(lambda: os.path.exists(path), 10, what="tcpdump to start")
    time.sleep(0.5)
    return proc, path


def test_outside_zones_refused_never_recursed(lab):
    """RFC 8766 §5.2/§9: queries outside every configured zone (with RD=1, over
    UDP and TCP) get REFUSED, no answer, RA never set, and the router sends no
    packet anywhere for them (tcpdump on every interface of dpt-r sees no port
    53 traffic and no unicast other than the lab's own test ports). In-zone
    answers do not set RA either."""
    proc, path = _capture_upstream(lab)
    try:
        for qname, rdtype in OUTSIDE:
            for tcp in (False, True):
                q = make_query(qname, rdtype)
                q.flags |= dns.flags.RD
                with L.netns(L.NS_R):
                    r = (dns.query.tcp if tcp else dns.query.udp)(q, L.PROXY_ADDR, port=L.PROXY_PORT, timeout=5)
                assert r.rcode() == dns.rcode.REFUSED, (qname, tcp, r)
                assert not r.answer and not (r.flags & dns.flags.RA), (qname, r)
        for qname, rdtype in [(L.ZONE1, T.SOA), (name("_ipp", "_tcp"), T.PTR), (L.ZONE2, T.NS)]:
            r, _ = query(qname, rdtype)
            assert not (r.flags & dns.flags.RA), (qname, r)
        time.sleep(1.0)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(5)
    out = subprocess.run(["tcpdump", "-n", "-r", path], capture_output=True, text=True, timeout=30).stdout
    packets = [ln for ln in out.splitlines() if ln.strip()]
    print("capture for %d outside names × UDP/TCP: %d packets" % (len(OUTSIDE), len(packets)))
    assert not packets, "traffic other than the test's own:\n%s" % "\n".join(packets[:20])


ADMIN_DEFAULT_PORT = 8053


def test_admin_listens_on_loopback_only_by_default(lab):
    """config/discovery-proxy.yaml `admin` default 127.0.0.1:8053: with no admin
    setting the endpoint is bound to 127.0.0.1 only (ss shows no wildcard or
    link address), so the router's link address 192.0.2.1:8053 refuses."""
    binary = L.Lab.proxy_bin()
    proc = lab.spawn(L.NS_R, [binary, "--link", "%s=%s" % (L.R_IF1, L.ZONE1), "--listen", "127.0.0.1:5310",
                              "--server-name", L.SERVER_NAME], "proxy-admin-default",
                     env_extra={"DBUS_SYSTEM_BUS_ADDRESS": lab.dbus_addr})
    try:
        def listening():
            out = L.nsrun(L.NS_R, ["ss", "-ltnH", "sport", "= :%d" % ADMIN_DEFAULT_PORT]).stdout
            return out if out.strip() else None
        out = L.wait_for(listening, 20, what="the admin endpoint to listen")
        locals_ = [ln.split()[3] for ln in out.splitlines()]
        print("admin listeners: %s" % locals_)
        assert locals_ == ["127.0.0.1:%d" % ADMIN_DEFAULT_PORT], locals_
        with L.netns(L.NS_R):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(3)
        with pytest.raises(ConnectionRefusedError):
            s.connect((L.R_V4_1, ADMIN_DEFAULT_PORT))
        s.close()
    finally:
        lab.stop_proc("proxy-admin-default")
    assert proc.returncode is not None


# ---------------------------------------------------------------------------
# Privileges: --user
# ---------------------------------------------------------------------------

def _proc_status(pid):
    return _proc_status_path("/proc/%d/status" % pid)


def _proc_status_path(path):
    fields = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.split()
    return fields


@pytest.fixture
def shared_dbus(lab):
    """Let an unprivileged proxy reach the lab's D-Bus socket (its directory is 0700)."""
    mode = os.stat(lab.dir).st_mode & 0o777
    os.chmod(lab.dir, 0o755)
    yield
    os.chmod(lab.dir, mode)


def test_runs_as_unprivileged_user_after_binding_53(lab, shared_dbus):
    """`--user nobody`: started as root, the proxy binds port 53 (privileged in
    the namespace), then drops to nobody/nogroup with no supplementary groups
    and no capabilities (real, effective, saved and fs IDs all 65534: root can
    not be regained). It answers browses on port 53 over UDP and TCP, reloads
    a config file readable by nobody on SIGHUP (adding link 2), and recovers
    from an avahi-daemon restart (a new D-Bus connection as nobody)."""
    import pathlib
    cfg_dir = pathlib.Path(lab.dir) / "user-cfg"  # pytest's tmp_path is under a 0700 dir
    cfg_dir.mkdir(exist_ok=True)
    os.chmod(cfg_dir, 0o755)
    cfg = cfg_dir / "proxy.yaml"
    base = ("links:\n  - {interface: %s, domain: %s}\nlisten: [\"127.0.0.1:53\"]\nserver-name: %s\n"
            "user: nobody\nadmin: off\nlog-level: debug\n" % (L.R_IF1, L.ZONE1, L.SERVER_NAME))
    cfg.write_text(base)
    os.chmod(cfg, 0o644)
    proc = lab.spawn(L.NS_R, [L.Lab.proxy_bin(), "--config", str(cfg)], "proxy-user",
                     env_extra={"DBUS_SYSTEM_BUS_ADDRESS": lab.dbus_addr})
    ipp = name("_ipp", "_tcp")
    p1 = name("Printer One", "_ipp", "_tcp")
    try:
        L.wait_for(lambda: "running as nobody" in lab.log_text("proxy-user"), 20,
                   what="the proxy to switch to nobody:\n" + lab.log_text("proxy-user"))
        st = _proc_status(proc.pid)
        print("proxy status: Uid %s Gid %s Groups %s CapEff %s" % (st["Uid"], st["Gid"], st.get("Groups"), st["CapEff"]))
        assert st["Uid"] == ["65534"] * 4 and st["Gid"] == ["65534"] * 4, st
        assert st.get("Groups", []) in ([], ["65534"]), st.get("Groups")  # initgroups: nogroup only
        for task in os.listdir("/proc/%d/task" % proc.pid):  # every thread, not just the leader
            assert _proc_status_path("/proc/%d/task/%s/status" % (proc.pid, task))["Uid"] == ["65534"] * 4
        assert int(st["CapEff"][0], 16) == 0 and int(st["CapPrm"][0], 16) == 0, st
        _r, got = browse_until(ipp, [p1], port=53)
        assert p1 in got
        r, _ = query(p1, T.SRV, tcp=True, port=53)
        assert rrset(r, p1, T.SRV) is not None, r
        # SIGHUP reads the file again as nobody: unreadable -> rejected, old config kept
        cfg.write_text(base.replace("links:\n", "links:\n  - {interface: %s, domain: %s}\n" % (L.R_IF2, L.ZONE2)))
        os.chmod(cfg, 0o600)
        os.kill(proc.pid, signal.SIGHUP)
        L.wait_for(lambda: "reload rejected" in lab.log_text("proxy-user"), 10, what="the rejected reload")
        assert proc.poll() is None
        os.chmod(cfg, 0o644)
        os.kill(proc.pid, signal.SIGHUP)
        L.wait_for(lambda: "configuration reloaded" in lab.log_text("proxy-user"), 10, what="the reload")
        ipp2, p2 = name("_ipp", "_tcp", zone=ZONE2), name("Printer Two", "_ipp", "_tcp", zone=ZONE2)
        _r, got = browse_until(ipp2, [p2], port=53)
        assert p2 in got, "link 2 not served after the reload as nobody"
        # avahi restarts: the backend reconnects to D-Bus as nobody
        lab.restart_router_avahi(down_seconds=1.0)

        def back():
            r, _ = query(p1, T.SRV, port=53, timeout=8, check=False)
            return rrset(r, p1, T.SRV) is not None
        L.wait_for(back, 20, interval=0.5, what="answers as nobody after an avahi restart")
        assert proc.poll() is None
    finally:
        lab.stop_proc("proxy-user")
        if "avahi-r" not in lab.procs or lab.procs["avahi-r"].poll() is not None:
            lab.stop_proc("avahi-r")
            lab.start_router_avahi()
    assert_no_backtrace(lab.log_text("proxy-user", 400))


# ---------------------------------------------------------------------------
# Start-up errors: one line, non-zero exit, no backtrace
# ---------------------------------------------------------------------------

def _run_as_nobody(lab, args, timeout=20):
    cmd = ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", "--",
           L.Lab.proxy_bin()] + list(args)
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.dbus_addr)
    r = L.nsrun(L.NS_R, cmd, check=False, timeout=timeout, env=env)
    return r.returncode, r.stdout, r.stderr


BASE_ARGS = ["--link", "%s=%s" % (L.R_IF1, L.ZONE1), "--server-name", L.SERVER_NAME, "--admin", "off",
             "--log-level", "error"]


def test_permission_denied_on_port_53_is_one_line(lab, shared_dbus):
    """Port 53 without root or CAP_NET_BIND_SERVICE: `discovery-proxy: error:
    cannot listen on 127.0.0.1:53/udp: Permission denied`, exit 1."""
    rc, out, err = _run_as_nobody(lab, BASE_ARGS + ["--listen", "127.0.0.1:53"])
    print(err.strip())
    assert rc == 1, (rc, out, err)
    assert_no_backtrace(out + err)
    lines = error_lines(err)
    assert len(lines) == 1 and lines[0].startswith("discovery-proxy: error: "), err
    assert "127.0.0.1:53" in lines[0] and "Permission denied" in lines[0], lines[0]


def test_user_switch_needs_root_and_a_real_user(lab, tmp_path, shared_dbus):
    """`--user` by a non-root process: one line naming the user, exit 1; an
    unknown user: a configuration error naming it, exit 2."""
    rc, out, err = _run_as_nobody(lab, BASE_ARGS + ["--listen", "127.0.0.1:5311", "--user", "root"])
    print(err.strip())
    assert rc == 1 and "--user root" in err and "only root can switch user" in err, (rc, err)
    assert len(error_lines(err)) == 1, err
    rc, out, err = run_proxy(lab, tmp_path, None, BASE_ARGS + ["--listen", "127.0.0.1:5311", "--user", "no-such-dpt-user"])
    print(err.strip())
    assert rc == 2 and 'user: "no-such-dpt-user": no such user' in err, (rc, err)
    assert_no_backtrace(out + err)


def test_unknown_interface_is_one_line_exit_2(lab, tmp_path):
    """An interface the host does not have: `links[..].interface: "nosuch0":
    no such network interface (this host has: ...)`, exit 2, before binding."""
    rc, out, err = run_proxy(lab, tmp_path, None, ["--link", "nosuch0=%s" % L.ZONE1, "--listen", "127.0.0.1:5312",
                                                    "--server-name", L.SERVER_NAME])
    print(err.strip())
    assert rc == 2, (rc, err)
    lines = error_lines(err)
    assert len(lines) == 1 and '"nosuch0"' in lines[0] and "no such network interface" in lines[0], err
    assert_no_backtrace(out + err)
