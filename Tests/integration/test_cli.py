"""Operator interface of the executable (README "Configuration"): --check-config,
one-line configuration and start-up errors with their exit status, and a clean
exit on SIGTERM. Everything runs inside dpt-r (interfaces lo, dpr-l1, dpr-l2)."""

import os
import re
import signal
import socket
import subprocess
import time

import pytest

import lab as L

ERROR_LINE = re.compile(r'^discovery-proxy: error: (\S+): "(.*)": (.+)$')
BACKTRACE = ("Fatal error", "Stack dump", "Backtrace", "Current stack trace", "0x0000")


def run_proxy(lab, tmp_path, yaml_text=None, args=(), timeout=20):
    """Run the binary in dpt-r to completion; return (exit code, stdout, stderr)."""
    cmd = [L.Lab.proxy_bin()]
    if yaml_text is not None:
        path = tmp_path / "proxy.yaml"
        path.write_text(yaml_text)
        cmd += ["--config", str(path)]
    cmd += list(args)
    if "--admin" not in cmd and (yaml_text is None or "admin:" not in yaml_text):
        cmd += ["--admin", "off"]  # the lab's own proxies hold admin ports in this namespace
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.dbus_addr)
    r = L.nsrun(L.NS_R, cmd, check=False, timeout=timeout, env=env)
    return r.returncode, r.stdout, r.stderr


def error_lines(stderr):
    return [line for line in stderr.splitlines() if line.strip()]


def assert_no_backtrace(text):
    for marker in BACKTRACE:
        assert marker not in text, "backtrace-like output (%r):\n%s" % (marker, text)


GOOD = """\
links:
  - interface: dpr-l1
    domain: lab1.example.
  - interface: dpr-l2
    domain: "Building 2.example."
listen: ["127.0.0.1:5320", "[::1]:5320"]
server-name: ns.example.
mdns-query-rate: 25
"""


def test_check_config_good(lab, tmp_path):
    """README "Configuration": --check-config prints the effective
    configuration (links, listen, overridden values, detected subnets) and
    exits 0; RFC 8766 §5.3: a rich-text zone name with a space is accepted."""
    rc, out, err = run_proxy(lab, tmp_path, GOOD, ["--check-config"])
    assert rc == 0, "exit %d\nstdout:\n%s\nstderr:\n%s" % (rc, out, err)
    for want in ("dpr-l1", "dpr-l2", "lab1.example.", "127.0.0.1:5320",
                 "[::1]:5320", "ns.example.", "192.0.2.0/24", "198.51.100.0/24"):
        assert want in out, "%r missing from the printed configuration:\n%s" % (want, out)
    assert "Building 2.example." in out or "Building\\0322.example." in out, out
    assert re.search(r"mdns-query-rate:\s*25\b", out), out
    assert not err.strip(), "stderr on a good configuration:\n%s" % err


def test_check_config_output_loads_back(lab, tmp_path):
    """README "Configuration": what --check-config prints is "the effective
    configuration" in the file's own YAML syntax: loading it again gives the
    same configuration (here: a rich-text zone, RFC 8766 §5.3, whose space
    the printer writes as a DNS `\\032` escape inside a YAML string)."""
    rc, out, err = run_proxy(lab, tmp_path, GOOD, ["--check-config"])
    assert rc == 0, err
    rc2, out2, err2 = run_proxy(lab, tmp_path, out, ["--check-config"])
    assert rc2 == 0, "the printed configuration does not load again (exit %d):\n%s" % (rc2, err2)
    strip = lambda text: [line.split("  #")[0].rstrip() for line in text.splitlines()]  # noqa: E731
    assert strip(out2) == strip(out), "printing is not stable:\n%s\n---\n%s" % (out, out2)


BAD_CASES = {
    "unknown-interface": ("""\
links:
  - interface: nosuch0
    domain: lab1.example.
listen: ["127.0.0.1:5320"]
""", [("links[0].interface", "nosuch0")]),
    "malformed-domain": ("""\
links:
  - interface: dpr-l1
    domain: a..b
listen: ["127.0.0.1:5320"]
""", [("links[0].domain", "a..b")]),
    "duplicate-domain": ("""\
links:
  - interface: dpr-l1
    domain: lab1.example.
  - interface: dpr-l2
    domain: LAB1.example.
listen: ["127.0.0.1:5320"]
""", [("links[1].domain", "LAB1.example.")]),
    "bad-listen": ("""\
links:
  - interface: dpr-l1
    domain: lab1.example.
listen: ["999.1.1.1:53"]
""", [("listen[0]", "999.1.1.1:53")]),
    # every problem at once: each must get its own line, and nothing else
    "all-at-once": ("""\
links:
  - interface: nosuch0
    domain: lab1.example.
  - interface: dpr-l1
    domain: a..b
  - interface: dpr-l2
    domain: lab1.example.
listen: ["999.1.1.1:53"]
""", [("links[0].interface", "nosuch0"), ("links[1].domain", "a..b"),
      ("links[2].domain", "lab1.example."), ("listen[0]", "999.1.1.1:53")]),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_check_config_errors(lab, tmp_path, case):
    """README "Configuration": a bad configuration exits 2 and prints one
    line per problem, `discovery-proxy: error: KEY: "VALUE": reason`, naming
    the key and the bad value; nothing on stdout, no backtrace, and no line
    about a problem the file does not have."""
    yaml_text, want = BAD_CASES[case]
    rc, out, err = run_proxy(lab, tmp_path, yaml_text, ["--check-config"])
    lines = error_lines(err)
    assert rc == 2, "exit %d, want 2\nstderr:\n%s" % (rc, err)
    assert "configuration OK" not in out, out
    assert_no_backtrace(err)
    parsed = [(m.group(1), m.group(2)) for m in map(ERROR_LINE.match, lines) if m]
    for key, value in want:
        assert (key, value) in parsed, "no error line for %s: %r\nstderr:\n%s" % (key, value, err)
    for line in lines:
        assert ERROR_LINE.match(line), "a line about no problem of this file, or not in the " \
            "`KEY: \"VALUE\": reason` form: %r\nstderr:\n%s" % (line, err)
    assert len(lines) == len(want), "want exactly %d error lines, got %d:\n%s" % (
        len(want), len(lines), err)


def test_check_config_errors_from_flags(lab, tmp_path):
    """README "Configuration": flag errors are reported the same way (the
    flag's key and value, one line each, exit 2)."""
    rc, _out, err = run_proxy(lab, tmp_path, None, [
        "--link", "nosuch0=lab1.example.", "--link", "dpr-l1=a..b",
        "--link", "dpr-l2=lab9.example.", "--listen", "127.0.0.1:5320", "--listen", "1.2.3.4",
        "--check-config"])
    assert rc == 2, err
    assert_no_backtrace(err)
    lines = error_lines(err)
    for value in ("nosuch0", "a..b", "1.2.3.4"):
        assert any(ERROR_LINE.match(line) and value in line for line in lines), (value, err)
    assert len(lines) == 3, "want exactly 3 error lines:\n%s" % err


def _bind_both(port):
    """Occupy 127.0.0.1:port for UDP and TCP inside dpt-r."""
    with L.netns(L.NS_R):
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    u.bind((L.PROXY_ADDR, port))
    t.bind((L.PROXY_ADDR, port))
    t.listen(1)
    return u, t


def test_port_in_use_is_one_line_exit_1(lab, tmp_path):
    """README "Configuration": a start-up error (port already in use) is one
    line `discovery-proxy: error: ...` with exit status 1, no backtrace."""
    port = 5321
    socks = _bind_both(port)
    try:
        rc, out, err = run_proxy(lab, tmp_path, None, [
            "--link", "%s=%s" % (L.R_IF1, L.ZONE1), "--listen", "%s:%d" % (L.PROXY_ADDR, port),
            "--server-name", L.SERVER_NAME, "--log-level", "error"], timeout=30)
    finally:
        for s in socks:
            s.close()
    assert rc == 1, "exit %d, want 1\nstdout:\n%s\nstderr:\n%s" % (rc, out, err)
    assert_no_backtrace(out + err)
    lines = error_lines(err)
    assert len(lines) == 1, "want one line, got:\n%s" % err
    assert lines[0].startswith("discovery-proxy: error: "), lines[0]
    assert str(port) in lines[0], "the error does not name the address: %s" % lines[0]


def test_sigterm_exits_zero_promptly(lab):
    """Operator interface: SIGTERM (systemd stop, CI teardown) stops a running
    proxy, one that has live mDNS browses, with exit status 0 within 5 s."""
    port = 5322
    proc = lab.start_proxy(name="proxy-sigterm", port=port, v6=False)
    try:
        import dns.rdatatype as T
        from helpers import name, query
        query(name("_ipp", "_tcp"), T.PTR, port=port)  # a live avahi browse
        assert proc.poll() is None
        t0 = time.monotonic()
        os.kill(proc.pid, signal.SIGTERM)
        try:
            rc = proc.wait(10)
        except subprocess.TimeoutExpired:
            rc = None
        dt = time.monotonic() - t0
        assert rc is not None, "still running 10 s after SIGTERM"
        assert rc == 0, "exit status %s after SIGTERM\n%s" % (rc, lab.log_text("proxy-sigterm", 30))
        assert dt < 5.0, "took %.1fs to exit after SIGTERM" % dt
        assert_no_backtrace(lab.log_text("proxy-sigterm", 50))
    finally:
        lab.stop_proc("proxy-sigterm")
