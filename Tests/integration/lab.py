"""Network-namespace lab for the discovery-proxy integration suite.

Layout (all addresses are documentation ranges, RFC 5737 / RFC 3849)::

    dpt-l1 [dpl1-r 192.0.2.10/24 2001:db8:1::10/64]
        |  veth (link 1)
    dpt-r  [dpr-l1 192.0.2.1/24 2001:db8:1::1/64]   <- proxy, avahi (D-Bus),
           [dpr-l2 198.51.100.1/24 2001:db8:2::1/64]    private dbus-daemon,
        |  veth (link 2)                                 tcpdump
    dpt-l2 [dpl2-r 198.51.100.10/24 2001:db8:2::10/64]

* dpt-r: private dbus-daemon (unix socket in the lab's temp dir) and an
  avahi-daemon that only queries (publishing disabled) on dpr-l1/dpr-l2.
  The proxy runs here and listens on 127.0.0.1:5300 and [::1]:5300.
* dpt-l1: avahi-daemon responder (host ``farhost1``, static .service files)
  plus a python-zeroconf responder (responder.py) for the awkward records.
* dpt-l2: avahi-daemon responder (host ``farhost2``) with "Printer Two" and
  the 64 ``_bulk._tcp`` instances with ~700-byte TXT records.

Only Debian's /usr/bin/python3 is supported (python3-dnspython,
python3-zeroconf, python3-pytest).  Everything runs as root.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from xml.sax.saxutils import escape as xml_escape

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

# DPT_LAB_ID lets two labs run side by side (e.g. two engineers' suites on one
# host): namespaces become dpt-<id>-r etc., and each lab cleans up only its own.
# Under pytest-xdist each worker process is a lab of its own (its id, gw0, gw1, ...).
LAB_ID = "-".join(part for part in (os.environ.get("DPT_LAB_ID", "").strip(),
                                    os.environ.get("PYTEST_XDIST_WORKER", "")) if part)
NS_PREFIX = "dpt-%s-" % LAB_ID if LAB_ID else "dpt-"
NS_R, NS_L1, NS_L2 = NS_PREFIX + "r", NS_PREFIX + "l1", NS_PREFIX + "l2"
R_IF1, R_IF2 = "dpr-l1", "dpr-l2"  # router side of link 1 / link 2
L1_IF, L2_IF = "dpl1-r", "dpl2-r"  # far side

R_V4_1, R_V6_1 = "192.0.2.1", "2001:db8:1::1"
R_V4_2, R_V6_2 = "198.51.100.1", "2001:db8:2::1"
L1_V4, L1_V6 = "192.0.2.10", "2001:db8:1::10"
L2_V4, L2_V6 = "198.51.100.10", "2001:db8:2::10"

ZONE1, ZONE2 = "lab1.example.", "lab2.example."
SERVER_NAME = "ns.example."
PROXY_ADDR, PROXY_ADDR6, PROXY_PORT = "127.0.0.1", "::1", 5300

FAR1_HOST, FAR2_HOST = "farhost1", "farhost2"
ZC_HOST = "zc-host"        # zeroconf host: 192.0.2.20, 2001:db8:1::20
MIXED_HOST = "mixedhost"   # 169.254.7.7, fe80::77, 192.0.2.77, 2001:db8:1::77
REALM_HOST = "realm-host"  # 10.20.30.40, 192.0.2.40, fd00:db8::40, 2001:db8:1::40
LL_HOST = "ll-host"        # 169.254.8.8, fe80::88 only (published by tests, never in ZC_SERVICES)
V4_HOST = "v4only-host"    # 192.0.2.21 only (published by tests, never in ZC_SERVICES)

BULK_COUNT = 64
BULK_TXT_STRINGS = [("k%d=" % i).encode() + bytes([0x61 + i]) * 230 for i in range(3)]

# --------------------------------------------------------------------------
# What lives where (the tests import these)
# --------------------------------------------------------------------------

# avahi static services on link 1 (host farhost1)
L1_AVAHI_SERVICES = [
    # name, type, port, [subtypes], [txt strings]
    ("Printer One", "_ipp._tcp", 631, ["_universal._sub._ipp._tcp"],
     [b"rp=printers/one", b"note=lab one", b"flag"]),
    ("Printer Plain", "_ipp._tcp", 632, [], [b"rp=printers/plain"]),
    ("Web One", "_http._tcp", 80, ["_printer._sub._http._tcp"], [b"path=/"]),
    ("Avahi NoTxt", "_notxt._tcp", 9, [], []),
    # python-zeroconf cannot publish a dot inside a label; avahi can
    ("Dot.ted Printer", "_ipp._tcp", 9100, [], [b"txtvers=1", b"ty=Dotted"]),
]
# avahi static services on link 2 (host farhost2)
L2_AVAHI_SERVICES = [
    ("Printer Two", "_ipp._tcp", 631, ["_universal._sub._ipp._tcp"], [b"rp=printers/two"]),
] + [
    ("Bulk %02d" % i, "_bulk._tcp", 10000 + i, [], BULK_TXT_STRINGS)
    for i in range(BULK_COUNT)
]

BIG_TXT = [("big%02d=" % i).encode() + b"B" * 200 for i in range(6)]  # ~1250 bytes
BINARY_TXT = [b"key=val=ue", b"=leading-equals", b"bin=\x00\x01\x7f\x80\xfe\xff", b"flag",
              b"utf8=K\xc3\xbcche"]
# zeroconf services on link 1: name, type, port, server host, raw TXT rdata
def _txt(strings):
    return b"".join(bytes([len(s)]) + s for s in strings)


ZC_SERVICES = {
    "Drucker K\u00fcche": ("_ipp._tcp", 9101, ZC_HOST, _txt([b"txtvers=1", b"ty=K\xc3\xbcche"])),
    "Big TXT": ("_bigtxt._tcp", 7000, ZC_HOST, _txt(BIG_TXT)),
    "Binary TXT": ("_txttest._tcp", 7001, ZC_HOST, _txt(BINARY_TXT)),
    "Empty TXT": ("_txttest._tcp", 7002, ZC_HOST, b""),
    "Mixed Service": ("_mixed._tcp", 7003, MIXED_HOST, _txt([b"m=1"])),
    "Removable Service": ("_remove._tcp", 7004, ZC_HOST, _txt([b"r=1"])),
    "Fresh Service": ("_fresh._tcp", 7005, ZC_HOST, _txt([b"f=1"])),
    "Cache Probe": ("_cacheprobe._tcp", 7006, ZC_HOST, _txt([b"c=1"])),
}
ZC_HOSTS = {
    ZC_HOST: ["192.0.2.20", "2001:db8:1::20"],
    MIXED_HOST: ["169.254.7.7", "192.0.2.77", "fe80::77", "2001:db8:1::77"],
    # Private addresses only as record data (RFC 8766 §5.5.2 tests); nothing sends to them.
    REALM_HOST: ["10.20.30.40", "192.0.2.40", "fd00:db8::40", "2001:db8:1::40"],
    LL_HOST: ["169.254.8.8", "fe80::88"],
    V4_HOST: ["192.0.2.21"],
}

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


@contextlib.contextmanager
def netns(name: str = NS_R):
    """Run the body with the calling thread inside network namespace `name`.

    Sockets created inside keep that namespace after the block ends."""
    orig = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open("/run/netns/%s" % name, os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns(%s): %s" % (name, os.strerror(e)))
        try:
            yield
        finally:
            if _libc.setns(orig, CLONE_NEWNET) != 0:
                e = ctypes.get_errno()
                raise OSError(e, "setns(back): %s" % os.strerror(e))
    finally:
        os.close(orig)
        os.close(target)


def run(cmd, check=True, timeout=30, **kw):
    """Run a command (list) with a bounded time; return CompletedProcess."""
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise RuntimeError("command failed (%d): %s\n%s%s" % (
            r.returncode, " ".join(cmd), r.stdout, r.stderr))
    return r


def nsrun(ns, cmd, check=True, timeout=30, env=None):
    return run(["ip", "netns", "exec", ns] + list(cmd), check=check, timeout=timeout, env=env)


def wait_for(pred, timeout, interval=0.25, what="condition"):
    """Poll pred() until truthy, at most `timeout` seconds; return its value."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except Exception as e:  # noqa: BLE001 - reported below
            last_exc = e
        if time.monotonic() >= deadline:
            raise TimeoutError("timed out after %.0fs waiting for %s%s" % (
                timeout, what() if callable(what) else what, (" (last error: %r)" % last_exc) if last_exc else ""))
        time.sleep(interval)


def list_netns():
    r = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


_FLAGS = {}


def _knows_flag(binary, flag):
    """Whether `binary --help` lists `flag` (cached per binary)."""
    if binary not in _FLAGS:
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
        _FLAGS[binary] = out.stdout + out.stderr
    return flag in _FLAGS[binary]


def teardown(lab, names, namespaces):
    """Stop a side lab's processes (in order) and delete its namespaces."""
    for name in names:
        lab.stop_proc(name)
    for ns in namespaces:
        run(["ip", "netns", "del", ns], check=False)


def kill_pid(pid, sig=signal.SIGTERM):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def drop_netns(ns):
    """Kill every process in namespace `ns` (SIGKILL) and delete it, if it exists."""
    if ns in list_netns():
        for p in run(["ip", "netns", "pids", ns], check=False).stdout.split():
            kill_pid(int(p), signal.SIGKILL)
        run(["ip", "netns", "del", ns], check=False)


def cleanup_stale():
    """Delete this lab's leftover namespaces (NS_R, NS_L1, NS_L2) and kill the
    processes inside them; other labs' namespaces (another DPT_LAB_ID) are left alone."""
    for ns in list_netns():
        if ns not in (NS_R, NS_L1, NS_L2):
            continue
        pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
        for p in pids:
            kill_pid(int(p), signal.SIGTERM)
        deadline = time.monotonic() + 3
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if os.path.exists("/proc/%s" % p)]
            time.sleep(0.1)
        for p in pids:
            kill_pid(int(p), signal.SIGKILL)
        run(["ip", "netns", "del", ns], check=False)


def avahi_unescape(s: str) -> str:
    """Undo avahi-browse -p escaping (\\DDD decimal, \\. and \\\\)."""
    out = bytearray()
    i = 0
    b = s.encode("utf-8")
    while i < len(b):
        c = b[i]
        if c == 0x5C and i + 3 < len(b) + 0 and b[i + 1:i + 4].isdigit():
            out.append(int(b[i + 1:i + 4]))
            i += 4
        elif c == 0x5C and i + 1 < len(b):
            out.append(b[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return out.decode("utf-8", "replace")


# --------------------------------------------------------------------------
# mDNS capture (tcpdump in dpt-r)
# --------------------------------------------------------------------------

def dns_packets(path):
    """[(timestamp, src, sport, dst, dport, dns.message.Message)] of every UDP DNS packet in
    a tcpdump capture file (Ethernet or Linux cooked headers, IPv4 and IPv6); what does not
    parse as DNS is skipped."""
    return PcapTail(path).new_packets()


class PcapTail:
    """A growing tcpdump capture file, read from where the last read stopped: a poll late in
    a full suite parses the packets since the previous poll, not the tens of thousands
    before them (which took seconds on a busy machine)."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.header = None

    def new_packets(self):
        """The UDP DNS packets (as dns_packets) completely written since the last call."""
        import dns.message
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        off = 0
        if self.header is None:
            if len(data) < 24:
                return []
            magic = struct.unpack("<I", data[:4])[0]
            endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
            nano = struct.unpack(endian + "I", data[:4])[0] == 0xA1B23C4D
            linktype = struct.unpack(endian + "I", data[20:24])[0]
            self.header = (endian, nano, linktype)
            off = 24
        endian, nano, linktype = self.header
        out = []
        while off + 16 <= len(data):
            ts_s, ts_f, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
            if off + 16 + incl > len(data):
                break   # tcpdump is still writing this one
            pkt = data[off + 16:off + 16 + incl]
            off += 16 + incl
            ts = ts_s + ts_f / (1e9 if nano else 1e6)
            if linktype == 113:      # LINUX_SLL
                proto, l3 = struct.unpack(">H", pkt[14:16])[0], pkt[16:]
            elif linktype == 276:    # LINUX_SLL2
                proto, l3 = struct.unpack(">H", pkt[0:2])[0], pkt[20:]
            elif linktype == 1:      # Ethernet
                proto, l3 = struct.unpack(">H", pkt[12:14])[0], pkt[14:]
            else:
                continue
            try:
                if proto == 0x0800:
                    if l3[9] != 17:
                        continue
                    ihl = (l3[0] & 0x0F) * 4
                    src = socket.inet_ntop(socket.AF_INET, l3[12:16])
                    dst = socket.inet_ntop(socket.AF_INET, l3[16:20])
                    udp = l3[ihl:]
                elif proto == 0x86DD:
                    if l3[6] != 17:
                        continue
                    src = socket.inet_ntop(socket.AF_INET6, l3[8:24])
                    dst = socket.inet_ntop(socket.AF_INET6, l3[24:40])
                    udp = l3[40:]
                else:
                    continue
                sport, dport = struct.unpack(">HH", udp[:4])
                msg = dns.message.from_wire(udp[8:])
            except Exception:  # noqa: BLE001 - not DNS: ignore
                continue
            out.append((ts, src, sport, dst, dport, msg))
        self.offset += off
        return out


class MdnsCapture:
    """tcpdump on every interface of dpt-r (udp port 5353), parsed lazily."""

    def __init__(self, path):
        self.path = path
        self.proc = None
        self._tail = PcapTail(path)
        self._seen = []

    def start(self, lab):
        self._tail, self._seen = PcapTail(self.path), []
        self.proc = lab.spawn(NS_R, ["tcpdump", "-i", "any", "-n", "-U", "--immediate-mode",
                                     "-s", "0", "-w", self.path, "udp", "port", "5353"],
                              "tcpdump", stdout=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(self.path) and os.path.getsize(self.path) >= 24,
                 10, what="tcpdump to open its capture file")

    def packets(self):
        """List of (timestamp, src_ip, dns.message.Message) for every mDNS packet so far."""
        self._seen.extend((ts, src, msg) for ts, src, _sp, _dst, _dp, msg in self._tail.new_packets())
        return list(self._seen)

    def queries(self, since=0.0, until=None, from_router=True):
        """Outgoing (QR=0) mDNS queries: list of (ts, qname_text_lower, qtype, src)."""
        import dns.flags
        res = []
        for ts, src, msg in self.packets():
            if ts < since or (until is not None and ts > until):
                continue
            if msg.flags & dns.flags.QR:
                continue
            if from_router and not (src in (R_V4_1, R_V4_2, R_V6_1, R_V6_2)
                                    or src.startswith("fe80:")):
                continue
            if from_router and src.startswith("fe80:") and src in _far_linklocals():
                continue
            for q in msg.question:
                res.append((ts, q.name.to_text().lower(), q.rdtype, src))
        return res


_FAR_LL = set()


def _far_linklocals():
    return _FAR_LL


# --------------------------------------------------------------------------
# The lab
# --------------------------------------------------------------------------

def private_system_bus_config(address):
    """Debian's system bus configuration, changed to run unprivileged in the foreground
    on its own socket `address` (a lab's private "system" bus for avahi-daemon)."""
    import re
    with open("/usr/share/dbus-1/system.conf") as f:
        conf = f.read()
    conf = re.sub(r"<user>[^<]*</user>", "", conf)
    conf = conf.replace("<fork/>", "")
    conf = re.sub(r"<pidfile>[^<]*</pidfile>", "", conf)
    conf = conf.replace("<syslog/>", "")
    conf = re.sub(r"<listen>[^<]*</listen>", "<listen>%s</listen>" % address, conf)
    conf = re.sub(r"<servicehelper>[^<]*</servicehelper>", "", conf)
    conf = conf.replace("<standard_system_servicedirs/>", "")
    # relative includes resolve against the config file's directory: make them absolute
    conf = conf.replace("<includedir>system.d</includedir>",
                        "<includedir>/usr/share/dbus-1/system.d</includedir>"
                        "<includedir>/etc/dbus-1/system.d</includedir>")
    return re.sub(r"<include ignore_missing=\"yes\">system-local.conf</include>", "", conf)


class Lab:
    def __init__(self, avahi_options=None):
        """`avahi_options` (used by scripts/bench) adds [server] lines to one daemon's
        avahi-daemon.conf, e.g. {"avahi-r": ["cache-entries-max=65536"]}."""
        self.avahi_options = dict(avahi_options or {})
        self.dir = tempfile.mkdtemp(prefix="dpt-lab-")
        self.procs = {}          # name -> Popen
        self.logs = {}           # name -> path
        self.dbus_addr = "unix:path=%s/dbus.sock" % self.dir
        self.responder = None
        self.proxy = None
        self.capture = None
        self._lock = threading.Lock()
        self.up = False

    # ---- process management ------------------------------------------------
    def spawn(self, ns, cmd, name, env_extra=None, stdin=None, stdout=None):
        log = os.path.join(self.dir, name + ".log")
        env = dict(os.environ)
        if env_extra:
            env.update(env_extra)
        lf = open(log, "ab")
        p = subprocess.Popen(["ip", "netns", "exec", ns] + list(cmd), env=env,
                             stdin=stdin if stdin is not None else subprocess.DEVNULL,
                             stdout=stdout if stdout is not None else lf, stderr=lf,
                             start_new_session=True)
        lf.close()
        self.procs[name] = p
        self.logs[name] = log
        return p

    def stop_proc(self, name, timeout=5):
        p = self.procs.pop(name, None)
        if p is None:
            return
        if p.poll() is None:
            kill_pid(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                kill_pid(p.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(3)

    def log_text(self, name, tail=200):
        path = self.logs.get(name)
        if not path or not os.path.exists(path):
            return ""
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-tail:])

    def check_alive(self, name):
        p = self.procs.get(name)
        if p is None or p.poll() is not None:
            raise RuntimeError("%s is not running (exit %s); log:\n%s" % (
                name, None if p is None else p.returncode, self.log_text(name)))

    # ---- topology ----------------------------------------------------------
    def _netns(self):
        for ns in (NS_R, NS_L1, NS_L2):
            run(["ip", "netns", "add", ns])
            for k in ("all", "default"):
                nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.%s.accept_dad=0" % k])
                nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.%s.dad_transmits=0" % k])
            nsrun(ns, ["ip", "link", "set", "lo", "up"])
        links = [(R_IF1, NS_L1, L1_IF, R_V4_1, R_V6_1, L1_V4, L1_V6),
                 (R_IF2, NS_L2, L2_IF, R_V4_2, R_V6_2, L2_V4, L2_V6)]
        for rif, fns, fif, rv4, rv6, fv4, fv6 in links:
            run(["ip", "link", "add", rif, "netns", NS_R, "type", "veth",
                 "peer", "name", fif, "netns", fns])
            for ns, ifn, v4, v6 in ((NS_R, rif, rv4, rv6), (fns, fif, fv4, fv6)):
                nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.%s.accept_dad=0" % ifn])
                nsrun(ns, ["ip", "addr", "add", v4 + "/24", "dev", ifn])
                nsrun(ns, ["ip", "-6", "addr", "add", v6 + "/64", "dev", ifn, "nodad"])
                nsrun(ns, ["ip", "link", "set", ifn, "multicast", "on", "up"])

        def ll_ready():
            for ns, ifn in ((NS_R, R_IF1), (NS_R, R_IF2), (NS_L1, L1_IF), (NS_L2, L2_IF)):
                out = nsrun(ns, ["ip", "-6", "addr", "show", "dev", ifn, "scope", "link"]).stdout
                if "fe80" not in out or "tentative" in out:
                    return False
            return True
        wait_for(ll_ready, 10, what="IPv6 link-local addresses")
        for ns, ifn in ((NS_L1, L1_IF), (NS_L2, L2_IF)):
            out = nsrun(ns, ["ip", "-6", "-o", "addr", "show", "dev", ifn, "scope", "link"]).stdout
            for tok in out.split():
                if tok.startswith("fe80"):
                    _FAR_LL.add(tok.split("/")[0])

    # ---- daemons -----------------------------------------------------------
    def _write(self, path, content, mode="w"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, mode) as f:
            f.write(content)

    def _dbus(self):
        self.spawn_dbus(NS_R, "dbus-daemon", self.dbus_addr)

    def spawn_dbus(self, ns, name, address):
        """A private "system" dbus-daemon in `ns` listening on `address` (unix:path=...),
        started as process `name`; returns once its socket exists."""
        path = os.path.join(self.dir, name + "-system.conf")
        self._write(path, private_system_bus_config(address))
        self.spawn(ns, ["dbus-daemon", "--nofork", "--nopidfile", "--config-file=" + path], name)
        socket_path = address.split("=", 1)[1]
        wait_for(lambda: self.check_alive(name) is None and os.path.exists(socket_path), 10,
                 what="%s socket in %s" % (name, ns))

    @staticmethod
    def _avahi_conf(host, ifaces, dbus, publish, extra=(), wide_area=False):
        lines = ["[server]", "host-name=%s" % host, "domain-name=local", "use-ipv4=yes",
                 "use-ipv6=yes", "allow-interfaces=%s" % ",".join(ifaces),
                 "enable-dbus=%s" % ("yes" if dbus else "no"),
                 "ratelimit-interval-usec=1000000", "ratelimit-burst=1000"]
        lines += list(extra)
        lines += ["", "[wide-area]", "enable-wide-area=%s" % ("yes" if wide_area else "no"), "",
                  "[publish]"]
        if publish:
            lines += ["publish-hinfo=no", "publish-workstation=no", "publish-aaaa-on-ipv4=yes",
                      "publish-a-on-ipv6=no"]
        else:
            lines += ["disable-publishing=yes"]
        lines += ["", "[reflector]", "enable-reflector=no", ""]
        return "\n".join(lines)

    @staticmethod
    def _service_xml(name, stype, port, subtypes, txts):
        parts = ['<?xml version="1.0" standalone="no"?>',
                 '<!DOCTYPE service-group SYSTEM "avahi-service.dtd">',
                 "<service-group>",
                 '  <name replace-wildcards="no">%s</name>' % xml_escape(name),
                 "  <service>", "    <type>%s</type>" % stype]
        parts += ["    <subtype>%s</subtype>" % s for s in subtypes]
        parts.append("    <port>%d</port>" % port)
        parts += ["    <txt-record>%s</txt-record>" % xml_escape(t.decode()) for t in txts]
        parts += ["  </service>", "</service-group>", ""]
        return "\n".join(parts)

    def _avahi(self, ns, name, host, ifaces, dbus, services):
        self.spawn_avahi(ns, name, self._avahi_conf(host, ifaces, dbus, publish=bool(services),
                                                    extra=self.avahi_options.get(name, ())),
                         services, self.dbus_addr if dbus else None)

    def spawn_avahi(self, ns, name, conf_text, services=(), dbus_addr=None, debug=False):
        """avahi-daemon in `ns` as process `name`, with `conf_text` as avahi-daemon.conf and
        `services` as its static .service files; `dbus_addr` is its system bus (None: none)."""
        d = os.path.join(self.dir, name)
        svc = os.path.join(d, "services")
        os.makedirs(svc, exist_ok=True)
        for i, (sname, stype, port, subs, txts) in enumerate(services):
            self._write(os.path.join(svc, "svc%03d.service" % i),
                        self._service_xml(sname, stype, port, subs, txts))
        conf = os.path.join(d, "avahi-daemon.conf")
        self._write(conf, conf_text)
        # A private /run keeps the pid file and socket apart from every other avahi-daemon;
        # `ip netns exec` runs the command in a mount namespace of its own, so these mounts
        # vanish with the daemon.
        script = ("set -e; mount -t tmpfs tmpfs /run; mkdir -p /run/avahi-daemon; "
                  "mount --bind '%s' /etc/avahi/services; "
                  "exec avahi-daemon --no-chroot --no-drop-root --no-rlimits %s-f '%s'"
                  % (svc, "--debug " if debug else "", conf))
        env = {"DBUS_SYSTEM_BUS_ADDRESS": dbus_addr} if dbus_addr else None
        return self.spawn(ns, ["sh", "-c", script], name, env_extra=env)

    def wait_avahi_on_bus(self, ns, name, dbus_addr, timeout=20):
        """Wait until avahi-daemon process `name` in `ns` answers a browse on the bus
        `dbus_addr` (it has started and registered on D-Bus); fail at once if it exits."""
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=dbus_addr)
        wait_for(lambda: self.check_alive(name) is None and nsrun(
                     ns, ["avahi-browse", "-p", "-t", "-k", "_none._tcp"],
                     check=False, env=env, timeout=10).returncode == 0,
                 timeout, interval=0.5, what="avahi-daemon %s in %s on D-Bus" % (name, ns))

    def stop_router_avahi(self):
        """SIGTERM the router's avahi-daemon (by its PID) and wait for it to exit."""
        p = self.procs.get("avahi-r")
        pid = None if p is None else p.pid
        self.stop_proc("avahi-r")
        return pid

    def start_router_avahi(self, timeout=20):
        """Start the router's avahi-daemon exactly as start() does; wait for it on D-Bus."""
        self._avahi(NS_R, "avahi-r", "dpt-router", [R_IF1, R_IF2], True, [])
        self.wait_avahi_on_bus(NS_R, "avahi-r", self.dbus_addr, timeout)
        return self.procs["avahi-r"].pid

    def restart_router_avahi(self, down_seconds=0.0):
        """Kill the router's avahi-daemon, wait `down_seconds`, start it again."""
        old = self.stop_router_avahi()
        time.sleep(down_seconds)
        return old, self.start_router_avahi()

    def far_services_dir(self, name):
        """The static-services directory of far avahi-daemon `name` (avahi-l1,
        avahi-l2): avahi-daemon watches it (inotify) and publishes or withdraws
        services as .service files appear or disappear."""
        return os.path.join(self.dir, name, "services")

    def add_far_services(self, name, services, prefix):
        """Write one .service file per (name, type, port, subtypes, txts) into
        far avahi-daemon `name`'s services directory; return the file paths."""
        d = self.far_services_dir(name)
        paths = []
        for i, (sname, stype, port, subs, txts) in enumerate(services):
            path = os.path.join(d, "%s%05d.service" % (prefix, i))
            tmp = path + ".tmp"
            self._write(tmp, self._service_xml(sname, stype, port, subs, txts))
            paths.append((tmp, path))
        for tmp, path in paths:  # rename: avahi never sees a half-written file
            os.rename(tmp, path)
        return [path for _tmp, path in paths]

    def remove_far_services(self, paths):
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    def avahi_browse(self, stype=None, timeout=20):
        """avahi-browse -prt in dpt-r; return list of resolved (iface, name, type, host, addr, port, txt)."""
        cmd = ["avahi-browse", "-p", "-r", "-t"]
        cmd += [stype] if stype else ["-a"]
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.dbus_addr)
        r = nsrun(NS_R, cmd, check=False, timeout=timeout, env=env)
        res = []
        for line in r.stdout.splitlines():
            f = line.split(";")
            if f[0] == "=" and len(f) >= 10:
                res.append((f[1], avahi_unescape(f[3]), f[4], f[6], f[7], f[8], f[9]))
        return res

    def _wait_far_services(self, timeout=60):
        want = {}
        for (n, t, *_r) in L1_AVAHI_SERVICES:
            want.setdefault(t, set()).add((R_IF1, n))
        for (n, t, *_r) in L2_AVAHI_SERVICES:
            want.setdefault(t, set()).add((R_IF2, n))
        for n, (t, *_r) in ZC_SERVICES.items():
            want.setdefault(t, set()).add((R_IF1, n))
        deadline = time.monotonic() + timeout
        missing = None
        for t, names in want.items():
            def ok():
                nonlocal missing
                for pname in ("avahi-l1", "avahi-l2", "avahi-r", "responder"):
                    self.check_alive(pname)
                seen = {(i, n) for (i, n, *_r) in self.avahi_browse(t)}
                missing = names - seen
                return not missing
            wait_for(ok, max(1, deadline - time.monotonic()), interval=0.5,
                     what=lambda: "far-link services of type %s in dpt-r (missing %r)" % (t, missing))

    def _responder(self):
        self.spawn(NS_L1, ["/usr/bin/python3", os.path.join(HERE, "responder.py"),
                           "--iface", L1_IF, "--addr", L1_V4],
                   "responder", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.responder = self.procs["responder"]
        line = self._responder_read(60)
        if line.strip() != "READY":
            raise RuntimeError("responder did not start: %r\n%s" % (line, self.log_text("responder")))

    def _responder_read(self, timeout):
        import select
        p = self.responder
        r, _w, _x = select.select([p.stdout], [], [], timeout)
        if not r:
            raise TimeoutError("responder did not answer within %ss" % timeout)
        return p.stdout.readline().decode("utf-8", "replace")

    def responder_cmd(self, cmd, timeout=30):
        """Send 'add NAME' / 'remove NAME' to responder.py; wait for its OK."""
        with self._lock:
            self.responder.stdin.write((cmd + "\n").encode("utf-8"))
            self.responder.stdin.flush()
            line = self._responder_read(timeout)
        if not line.startswith("OK"):
            raise RuntimeError("responder: %r for %r" % (line, cmd))
        return line

    # ---- proxy ---------------------------------------------------------------
    @staticmethod
    def proxy_bin():
        p = os.environ.get("DISCOVERY_PROXY_BIN", ".build/debug/discovery-proxy")
        return p if os.path.isabs(p) else os.path.join(REPO, p)

    def start_proxy(self, extra_args=(), timeout=30, name="proxy", port=PROXY_PORT, v6=True,
                    binary=None, log_level="debug", links=True, apex=ZONE1):
        """Start the proxy in dpt-r (`name` keys its log); wait for the apex SOA.
        `binary` overrides DISCOVERY_PROXY_BIN; benchmarks pass a quieter `log_level`.
        `links=False` leaves out the two --link flags (a --config file names the links);
        `apex` is the zone whose SOA shows that it answers."""
        binary = binary or self.proxy_bin()
        if not os.access(binary, os.X_OK):
            raise RuntimeError("proxy binary %s not found (build it or set DISCOVERY_PROXY_BIN)" % binary)
        cmd = [binary]
        if links:
            cmd += ["--link", "%s=%s" % (R_IF1, ZONE1), "--link", "%s=%s" % (R_IF2, ZONE2)]
        cmd += ["--listen", "%s:%d" % (PROXY_ADDR, port)]
        if v6:
            cmd += ["--listen", "[%s]:%d" % (PROXY_ADDR6, port)]
        cmd += ["--server-name", SERVER_NAME, "--log-level", log_level] + list(extra_args)
        if "--inventory-interval" not in cmd and _knows_flag(binary, "--inventory-interval"):
            # The link inventory's own browses would add mDNS traffic that tests count;
            # test_inventory.py turns it on. (Older builds, measured by the benchmark, lack it.)
            cmd += ["--inventory-interval", "0"]
        if "--admin" not in cmd:
            # Each instance in the namespace needs its own admin port: DNS port + 3000.
            cmd += ["--admin", "%s:%d" % (PROXY_ADDR, port + 3000)]
        proc = self.spawn(NS_R, cmd, name, env_extra={"DBUS_SYSTEM_BUS_ADDRESS": self.dbus_addr})
        if name == "proxy":
            self.proxy = proc

        def soa_ok():
            self.check_alive(name)
            import dns.message
            import dns.query
            import dns.rcode
            import dns.rdatatype
            q = dns.message.make_query(apex, dns.rdatatype.SOA)
            with netns(NS_R):
                r = dns.query.udp(q, PROXY_ADDR, port=port, timeout=1)
            return r.rcode() == dns.rcode.NOERROR and any(
                rr.rdtype == dns.rdatatype.SOA for rr in r.answer)
        wait_for(soa_ok, timeout, interval=0.3, what="%s to answer the apex SOA" % name)
        return proc

    def restore_after_avahi_test(self, healthy):
        """After a test that stopped the router's avahi-daemon: start it again if needed and
        wait until `healthy()` holds; if it never does (the test has already failed), restart
        the proxy so later tests get a working lab."""
        if "avahi-r" not in self.procs or self.procs["avahi-r"].poll() is not None:
            self.stop_proc("avahi-r")
            self.start_router_avahi()
        try:
            wait_for(healthy, 20, interval=1.0, what="the proxy to answer again")
        except TimeoutError:
            self.stop_proxy()
            self.start_proxy()

    def stop_proxy(self):
        self.stop_proc("proxy")
        self.proxy = None

    # ---- whole lab -----------------------------------------------------------
    @contextlib.contextmanager
    def starting(self, cleanup=None):
        """Around a lab's start: stale namespaces removed (`cleanup`, default this lab's),
        teardown at exit and on SIGTERM, and on any failure the logs dumped and everything
        stopped before the error goes on."""
        (cleanup or cleanup_stale)()
        atexit.register(self.stop)
        if threading.current_thread() is threading.main_thread():
            # SIGTERM (e.g. a CI timeout) must still run the teardown
            signal.signal(signal.SIGTERM, lambda *_a: sys.exit(143))
        try:
            yield
        except BaseException:
            self.dump_logs()
            self.stop()
            raise

    def stopped(self):
        """The end of a lab's stop: down, and its directory gone unless DPT_KEEP_LOGS."""
        self.up = False
        if os.environ.get("DPT_KEEP_LOGS") is None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, with_proxy=True):
        with self.starting():
            self._netns()
            self.capture = MdnsCapture(os.path.join(self.dir, "mdns.pcap"))
            self.capture.start(self)
            self._dbus()
            self._avahi(NS_R, "avahi-r", "dpt-router", [R_IF1, R_IF2], True, [])
            self._avahi(NS_L1, "avahi-l1", FAR1_HOST, [L1_IF], False, L1_AVAHI_SERVICES)
            self._avahi(NS_L2, "avahi-l2", FAR2_HOST, [L2_IF], False, L2_AVAHI_SERVICES)
            self._responder()
            self.wait_avahi_on_bus(NS_R, "avahi-r", self.dbus_addr)
            self._wait_far_services()
            self.up = True
            if with_proxy:
                self.start_proxy()
        return self

    def dump_logs(self, names=None, out=sys.stderr, tail=200):
        for name in names or list(self.logs):
            print("===== %s (%s) =====" % (name, self.logs[name]), file=out)
            print(self.log_text(name, tail), file=out)

    def stop(self):
        if self.responder is not None and self.responder.poll() is None:
            with contextlib.suppress(Exception):
                self.responder.stdin.close()
        for name in list(self.procs)[::-1]:
            self.stop_proc(name)
        for ns in (NS_R, NS_L1, NS_L2):
            if ns in list_netns():
                for p in run(["ip", "netns", "pids", ns], check=False).stdout.split():
                    kill_pid(int(p), signal.SIGKILL)
                run(["ip", "netns", "del", ns], check=False)
        self.stopped()


def main(argv):
    """`python3 lab.py up|down|browse`: manual use."""
    if len(argv) > 1 and argv[1] == "down":
        cleanup_stale()
        return 0
    lab = Lab()
    os.environ.setdefault("DPT_KEEP_LOGS", "1")
    lab.start(with_proxy="--proxy" in argv)
    for e in lab.avahi_browse():
        print(e)
    print("lab up; dir", lab.dir, "- press Enter to tear down")
    try:
        sys.stdin.readline()
    finally:
        lab.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
