"""Row l. srp (issue 44): the SRP registrar (RFC 9665) and advertising proxy under load, in
the SRP lab of Tests/integration/test_srp.py (its namespaces: the router with its own D-Bus,
an avahi-daemon for the proxy's browses, and the proxy; the client link with an avahi-daemon
of its own and the requesters).

1. SIG(0) P-256 verification alone, on one core: the release build's DNSWire (SIG0.isValid,
   Sources/CSignature on libcrypto), compiled here with scripts/bench/srp_verify.swift against
   .build/release's objects; beside `openssl speed ecdsap256`'s verify/s in the same run, and
   python cryptography (key import + verify, what the lab's requester uses) as context.
2. Registrations per second over UDP, the store on disk (SQLite WAL, synchronous=FULL):
   (a) new hosts (100 to 1000), each probed for by the proxy's responder and answered after
   the probe (RFC 6762 §8.1: about a second; or the 1.3 s wait), 2,500 outstanding at most:
   by Little's law ~1 s a registration needs 2,000 outstanding for 2,000/s; (b) renewals with the same content (verify + store, nothing published)
   of 100 hosts, ten times each, and of 1000 hosts, while an ordinary client on the link asks
   the same listener for a cache hit every 10 ms. Every update is signed before the clock
   starts (srp_update.py's build and sign, a key per host), and sent from 16 source addresses
   on the client link with a bounded number outstanding and a time limit (srp_load.py).
3. Time from NOERROR to the service seen (a) by avahi-browse on the client link and (b) in the
   proxy's PTR answer for the link's zone (a unicast client polling over TCP), one registration
   at a time.
4. Proxy RSS and store size per registered host as hosts are added up to N for at most
   `growth_seconds`, with the rate of each stretch (the steady rate: 2,500 outstanding
   throughout) and the proxy's "avahi-daemon is not answering" lines; renewals again at N.
5. Cache-hit UDP qps of ordinary queries (dnsperf, row a's method, services on the client
   link's own avahi-daemon) with 0, 2500 and N registrations, each against a reference proxy
   (the same binary, registrar off) running beside it, in alternating runs.

While new hosts stream in, the client link's avahi-daemon runs at SCHED_IDLE (`DeviceYields`),
and the CPU time of the proxy and of both avahi-daemons is reported. The same while renewals
run: it is a device on the link, on this machine's cores only in the lab.

Every load loop is bounded in count and in time; the namespaces, daemons and the proxy are the
lab's children, stopped at the end and on an error."""

from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request

import dns.message
import dns.query
import dns.rdatatype

import dnsperf
import lab as L
import probes
import srp_load
import test_srp as T
from report import ms

SECTION = "l. srp"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
NS_SR, NS_SC = T.NS_SR, T.NS_SC
ROUTER, CLIENT = T.ROUTER_C, T.CLIENT
PORT = T.PORT
ADMIN = PORT + 3000
REF_PORT, REF_ADMIN = PORT + 20, PORT + 3020   # the reference proxy (registrar off), on 127.0.0.1
ZONE = T.OFFICE
SOURCES = ["203.0.113.%d" % (100 + i) for i in range(16)]   # requesters' addresses (on lo, /32)
LOAD_TYPE, VIS_TYPE, MIX_TYPE = "_srpbench._tcp", "_srpvis._tcp", "_bench._tcp"
MIX_COUNT = 8          # instances on the client's avahi-daemon: a PTR answer that fits 1232 octets
TARGET_RATE = 2000

# The proxy under test and the reference (registrar off) differ in the listeners, the state
# directory and the srp section.
BASE_CONFIG = """\
server-name: ns.example.
listen: [%(listen)s]
admin: "127.0.0.1:%(admin)d"
inventory-interval: 0
log-level: notice
links:
  - interface: dsr-c
    domain: %(zone)s
push:
  state-dir: "%(dir)s/%(state)s"
"""
CONFIG = BASE_CONFIG + """\
srp:
  enabled: true
  store: "%(store)s"
  max-hosts: %(max_hosts)d
  max-hosts-per-client: %(max_hosts)d
  max-update-rate: 0                # a load generator: no per-address rate
"""


class Sizes:
    def __init__(self, smoke, hosts=None, growth_seconds=None):
        self.smoke = smoke
        self.hosts = hosts or (60 if smoke else 10000)
        self.small = min(self.hosts, 10 if smoke else 100)      # renewals at a small table
        self.small_passes = 2 if smoke else 10                  # ... each host renewed this often
        self.first = min(self.hosts, 20 if smoke else 1000)     # the judged new-host and renewal rows
        self.visibility = 3 if smoke else 20
        self.new_concurrency = 50 if smoke else 2500    # ~1 s each (the probe): 2,000/s needs 2,000
        self.renew_concurrency = 16 if smoke else 128
        self.phase_limit = 10 if smoke else 60                  # seconds, each rate row
        self.renew_n_limit = 10 if smoke else 30                # seconds, the renewals at N
        self.growth_limit = growth_seconds or (20 if smoke else 240)   # seconds, hosts first..N in all
        self.reply_timeout = 10 if smoke else 30
        self.verify_seconds = 0.5 if smoke else 3
        self.dnsperf_seconds = 1 if smoke else 5
        # 2,500 to N in one stream: with 2,500 outstanding and ~1 s a registration (the probe),
        # shorter stretches measure mostly their first answer's wait.
        self.checkpoints = sorted({c for c in (2500, self.hosts) if self.first < c <= self.hosts})


# --------------------------------------------------------------------------- the lab
class BenchLab(T.SRPLab):
    """test_srp's lab without the far link: the router (D-Bus, avahi-daemon for the proxy's
    browses, objects-per-client-max raised for older builds, the proxy) and the client link
    (D-Bus, an avahi-daemon
    publishing the MIX_TYPE services of host benchclient, the requesters on 16 more addresses)."""

    def __init__(self, lab_, binary, sizes):
        super().__init__(lab_)
        self.binary, self.sizes = binary, sizes
        self.store = os.path.join(lab_.dir, "srp-bench.sqlite")
        self.proc = None

    def start(self):
        for ns in (NS_SR, NS_SC):
            L.drop_netns(ns)
        for ns in (NS_SR, NS_SC):
            L.run(["ip", "netns", "add", ns])
            L.nsrun(ns, ["ip", "link", "set", "lo", "up"])
            for k in ("all", "default"):
                L.nsrun(ns, ["sysctl", "-q", "-w", "net.ipv6.conf.%s.accept_dad=0" % k])
        L.run(["ip", "link", "add", "dsr-c", "netns", NS_SR, "type", "veth", "peer", "name", "dsc-r", "netns", NS_SC])
        for ns, ifn, v4, v6 in ((NS_SR, "dsr-c", ROUTER, "2001:db8:c::1"), (NS_SC, "dsc-r", CLIENT, "2001:db8:c::10")):
            L.nsrun(ns, ["ip", "addr", "add", v4 + "/24", "dev", ifn])
            L.nsrun(ns, ["ip", "-6", "addr", "add", v6 + "/64", "dev", ifn, "nodad"])
            L.nsrun(ns, ["ip", "link", "set", ifn, "multicast", "on", "up"])
        # On lo, so that the client's avahi-daemon does not publish them; the kernel answers
        # ARP for them on dsc-r (arp_ignore 0), and they are in the link's subnet.
        for a in SOURCES:
            L.nsrun(NS_SC, ["ip", "addr", "add", a + "/32", "dev", "lo"])
        L.wait_for(lambda: "fe80" in L.nsrun(NS_SC, ["ip", "-6", "addr", "show", "dev", "dsc-r"]).stdout
                   and "tentative" not in L.nsrun(NS_SC, ["ip", "-6", "addr", "show", "dev", "dsc-r"]).stdout,
                   10, what="link-local address on dsc-r")
        self.lab.spawn_dbus(NS_SR, "srp-dbus-r", self.dbus_r)
        self.lab.spawn_dbus(NS_SC, "srp-dbus-c", self.dbus_c)
        # Raised for builds before stop 54, whose registrations were avahi entry groups.
        objects = max(1024, self.sizes.hosts + 1000)
        self.lab.spawn_avahi(NS_SR, "srp-avahi-r", self.lab._avahi_conf(
            "srp-router", ["dsr-c"], True, publish=True, extra=["objects-per-client-max=%d" % objects]),
            (), self.dbus_r)
        services = [("Bench %02d" % i, MIX_TYPE, 9100 + i, [], [b"txtvers=1", b"n=%d" % i]) for i in range(MIX_COUNT)]
        self.lab.spawn_avahi(NS_SC, "srp-avahi-c", self.lab._avahi_conf("benchclient", ["dsc-r"], True, publish=True),
                             services, self.dbus_c)
        self.lab.wait_avahi_on_bus(NS_SR, "srp-avahi-r", self.dbus_r)
        self.lab.wait_avahi_on_bus(NS_SC, "srp-avahi-c", self.dbus_c)

    def write_config(self, extra=""):
        with open(self.config, "w") as f:
            f.write(CONFIG % dict(listen='"%s:%d", "127.0.0.1:%d"' % (ROUTER, PORT, PORT), admin=ADMIN, zone=ZONE,
                                  dir=self.lab.dir, state="srp-bench-state", store=self.store,
                                  max_hosts=self.sizes.hosts + 1000) + extra)

    def start_proxy(self, extra=""):
        self.write_config(extra)
        self.proc = self.lab.spawn(NS_SR, [self.binary, "--config", self.config], "srp-proxy",
                                   env_extra={"DBUS_SYSTEM_BUS_ADDRESS": self.dbus_r})

        def soa_ok():
            self.lab.check_alive("srp-proxy")
            with L.netns(NS_SR):
                return dns.query.udp(dns.message.make_query(ZONE, "SOA"), ROUTER, port=PORT, timeout=1).answer
        L.wait_for(soa_ok, 30, interval=0.3, what="the SRP bench proxy to answer")
        return self.proc

    def start_reference(self):
        """The same binary with the registrar off, beside the proxy under test: the cache-hit
        rows compare the two in alternating runs, so that the machine's drift over the minutes
        between checkpoints (single runs moved 0.5-1.4x) is not read as the registrations' cost."""
        config = os.path.join(self.lab.dir, "srp-bench-ref.yaml")
        with open(config, "w") as f:
            f.write(BASE_CONFIG % dict(listen='"127.0.0.1:%d"' % REF_PORT, admin=REF_ADMIN, zone=ZONE, dir=self.lab.dir,
                                       state="srp-bench-ref-state"))
        self.lab.spawn(NS_SR, [self.binary, "--config", config], "srp-ref",
                       env_extra={"DBUS_SYSTEM_BUS_ADDRESS": self.dbus_r})

        def soa_ok():
            self.lab.check_alive("srp-ref")
            return (r := _ask(ZONE, "SOA", port=REF_PORT, timeout=1.0)) is not None and r.answer
        L.wait_for(soa_ok, 30, interval=0.3, what="the reference proxy to answer")

    def stop(self):
        L.teardown(self.lab, ("srp-proxy", "srp-ref", "srp-avahi-c", "srp-avahi-r", "srp-dbus-c", "srp-dbus-r"),
                   (NS_SR, NS_SC))

    def device_yields(self):
        """The client link's avahi-daemon at SCHED_IDLE while new hosts stream in (see
        `DeviceYields`)."""
        return DeviceYields(self.pid("srp-avahi-c"))

    def pid(self, name):
        return self.lab.procs[name].pid

    def disk(self):
        """Octets of the store and its -wal (and -shm) on disk."""
        sizes = {}
        for suffix in ("", "-wal", "-shm"):
            p = self.store + suffix
            sizes[suffix or "db"] = os.path.getsize(p) if os.path.exists(p) else 0
        return sizes

    def metrics(self):
        with L.netns(NS_SR):
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % ADMIN, timeout=5) as r:
                return r.read().decode()

    def log_problems(self):
        """The proxy's warning and error lines so far."""
        text = self.lab.log_text("srp-proxy", 1000000)
        return [line for line in text.splitlines() if re.search(r"\b(warning|error|critical)\b", line)]


# --------------------------------------------------------------------------- 1. verification
def _swift_verifier(workdir, log):
    """Compiles srp_verify.swift against the release build's DNSWire objects; None if it cannot."""
    rel = os.path.join(REPO, ".build", "release")
    sources = os.path.join(rel, "DNSWire.build", "sources")
    swiftc = shutil.which("swiftc")
    if not swiftc or not os.path.exists(sources):
        log("    no swiftc or no .build/release/DNSWire.build: Swift verification not measured")
        return None, "no swiftc or release build"
    with open(sources) as f:
        objects = [os.path.join(rel, "DNSWire.build", os.path.basename(p.strip()) + ".o") for p in f if p.strip()]
    out = os.path.join(workdir, "srp-verify")
    cmd = [swiftc, "-O", "-module-name", "SRPVerify", os.path.join(HERE, "srp_verify.swift"),
           "-I", os.path.join(rel, "Modules"),
           "-Xcc", "-fmodule-map-file=%s" % os.path.join(rel, "CSignature.build", "module.modulemap"),
           "-I", os.path.join(REPO, "Sources", "CLDNS"), "-I", os.path.join(REPO, "Sources", "CSignature", "include")]
    cmd += objects + [os.path.join(rel, "CSignature.build", "signature.c.o"), "-lldns", "-lcrypto", "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        log("    srp_verify.swift did not build: %s" % r.stderr.strip().splitlines()[-1:])
        return None, "did not build"
    return out, "release build's DNSWire objects"


def _pin():
    return ["taskset", "-c", "1"] if (os.cpu_count() or 1) >= 2 else []


def verification(report, sizes, workdir, log):
    sample = srp_load.sign([_spec(0, "verify", LOAD_TYPE, "Verify")], processes=1)[0]
    wire, _scalar, key_rdata = sample
    secs = sizes.verify_seconds
    out = {}
    binary, how = _swift_verifier(workdir, log)
    if binary:
        r = subprocess.run(_pin() + [binary, wire.hex(), key_rdata.hex(), str(secs)], capture_output=True,
                           text=True, timeout=secs * 3 + 60)
        vals = dict((line.split()[0], line.split()[1:]) for line in r.stdout.splitlines() if line.split())
        if r.returncode == 0 and "verify" in vals and vals.get("bad", ["0"])[0] == "100":
            out["swift"] = float(vals["verify"][1])
            out["swift_find"] = float(vals["find+verify"][1])
        else:
            log("    srp-verify failed: %s %s" % (r.stdout[-300:], r.stderr[-300:]))
    r = subprocess.run(_pin() + ["openssl", "speed", "-seconds", str(max(1, int(secs))), "ecdsap256"],
                       capture_output=True, text=True, timeout=120)
    m = re.search(r"^\s*256 bits ecdsa \(nistp256\)\s+\S+\s+\S+\s+([\d.]+)\s+([\d.]+)", r.stdout, re.MULTILINE)
    out["openssl"] = float(m.group(2)) if m else None
    out["openssl_sign"] = float(m.group(1)) if m else None
    out["python"] = _python_verify(wire, key_rdata, secs)
    ssl_version = subprocess.run(["openssl", "version"], capture_output=True, text=True).stdout.strip()
    pinned = "pinned to CPU 1, " if _pin() else ""
    if "swift" in out:
        report.row(SECTION, "SIG(0) P-256 verify, Swift (one core)", out["swift"], "/s",
                   target="context: beside OpenSSL's",
                   note="%sSIG0.isValid of a signed update, %s (dp_p256_verify: key imported and "
                        "public-checked on every call); SIG0.find + isValid %.0f/s" % (
                       pinned, how, out["swift_find"]))
    else:
        report.row(SECTION, "SIG(0) P-256 verify, Swift (one core)", None, "/s", note="not measured: %s" % how)
    report.row(SECTION, "reference: openssl speed ecdsap256 verify", out["openssl"], "/s",
               note="%s%s, same run; sign %.0f/s" % (pinned, ssl_version, out["openssl_sign"] or 0))
    if out.get("swift") and out.get("openssl"):
        report.row(SECTION, "Swift verify / openssl verify", out["swift"] / out["openssl"], "x")
    report.row(SECTION, "context: python cryptography, key import + verify", out["python"], "/s",
               note="%sthe lab requester's library, not the proxy" % pinned)
    return out


def _python_verify(wire, key_rdata, secs):
    """srp_update.verify per second (its message walk, key import and verify with python
    cryptography): context for what a requester-side library does."""
    script = (
        "import sys, time\n"
        "sys.path.insert(0, %r)\n"
        "import srp_update\n"
        "wire, key, secs = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2]), float(sys.argv[3])\n"
        "assert srp_update.verify(wire, key)\n"
        "n, t0 = 0, time.perf_counter()\n"
        "while time.perf_counter() - t0 < secs:\n"
        "    for _ in range(32):\n"
        "        assert srp_update.verify(wire, key)\n"
        "    n += 32\n"
        "print(n / (time.perf_counter() - t0))\n" % os.path.join(REPO, "scripts", "srp"))
    r = subprocess.run(_pin() + ["/usr/bin/python3", "-c", script, wire.hex(), key_rdata.hex(), str(secs)],
                       capture_output=True, text=True, timeout=secs * 3 + 60)
    try:
        return float(r.stdout.strip())
    except ValueError:
        return None


# --------------------------------------------------------------------------- updates
def _spec(i, prefix, stype, label, key=None, msg_id=None):
    return srp_load.Spec(
        zone="default.service.arpa.", host="%s%05d" % (prefix, i), service=stype, instance="%s %05d" % (label, i),
        port=9000 + i % 1000, txt=("txtvers=1", "n=%d" % i), address="203.0.113.%d" % (10 + i % 200),
        lease=7200, key=key, id=(i if msg_id is None else msg_id) & 0xFFFF)


# --------------------------------------------------------------------------- 5. cache hits
def _mix():
    qs = [("%s.%s" % (MIX_TYPE, ZONE), "PTR")] * 5
    for i in range(MIX_COUNT):
        inst = "Bench\\032%02d.%s.%s" % (i, MIX_TYPE, ZONE)
        qs += [(inst, "SRV"), (inst, "TXT")]
    qs += [("benchclient.%s" % ZONE, "A"), ("benchclient.%s" % ZONE, "AAAA")]
    return qs


def _ask(name, rtype, tcp=False, timeout=3.0, port=PORT):
    q = dns.message.make_query(name, rtype, use_edns=0, payload=1232)
    with L.netns(NS_SR):
        try:
            return (dns.query.tcp if tcp else dns.query.udp)(q, "127.0.0.1", port=port, timeout=timeout)
        except Exception:  # noqa: BLE001 - counted as unanswered
            return None


def _warm(queries, log, port=PORT):
    todo = list(dict.fromkeys(queries))
    for n in range(8):
        todo = [q for q in todo if not ((r := _ask(*q, port=port)) is not None and r.answer)]
        if not todo:
            return 0
        time.sleep(1.0)
    log("    %d mix queries never answered: %r" % (len(todo), todo[:3]))
    return len(todo)


def cache_hits(b, sizes, workdir, label, log):
    """Cache-hit UDP qps of the mix (row a's method, shorter), the proxy under test and the
    reference (registrar off) in turn: for each dnsperf setting, proxy, reference, reference,
    proxy (a drift of the machine's speed over the four runs cancels out of the means). The
    ratio is the proxy's mean over the reference's; the qps shown, the proxy's best run.

    The client link's avahi-daemon is paused (SIGSTOP) while dnsperf runs: it is a device on
    the link, sharing this machine's two cores only in the lab, and for minutes after 10,000
    registrations it takes half a core taking in their announcements (paced at 20 packets/s),
    which moved single runs by a factor of two. The router's avahi-daemon is not paused. The
    answers are cache hits: nothing waits for mDNS meanwhile."""
    queries = _mix()
    missing = _warm(queries, log)
    _warm(queries, log)
    for _ in range(2):
        _warm(queries, log, port=REF_PORT)
    path = dnsperf.write_queries(os.path.join(workdir, "srp-mix.bin"), [(n, t) for n, t in queries])
    tries = {"proxy": [], "reference": []}
    device = b.pid("srp-avahi-c")
    for clients, outstanding in ((1, 100), (4, 200)):
        for who in ("proxy", "reference", "reference", "proxy"):
            os.kill(device, signal.SIGSTOP)
            try:
                t = dnsperf.run(PORT if who == "proxy" else REF_PORT, path, sizes.dnsperf_seconds, clients=clients,
                                outstanding=outstanding, server="127.0.0.1", ns=NS_SR)
            finally:
                os.kill(device, signal.SIGCONT)
            t.pop("latencies")
            t["settings"] = (clients, outstanding)
            tries[who].append(t)
            log("    %s, %s: dnsperf -c %d -q %d: %.0f qps, %d lost" % (
                label, who, clients, outstanding, t["qps"], t["lost"]))
            _drain()
    best = dict(max(tries["proxy"], key=lambda t: t["qps"]))
    best["unanswered_after_warming"] = missing
    best["reference_best"] = max(t["qps"] for t in tries["reference"])
    mean = {who: statistics.mean(t["qps"] for t in runs) for who, runs in tries.items()}
    best["vs_reference"] = mean["proxy"] / mean["reference"] if mean["reference"] else None
    best["lost"] = sum(t["lost"] for runs in tries.values() for t in runs)
    return best, tries


class DeviceYields:
    """The client link's avahi-daemon runs on what the router leaves while a stream of
    updates runs: SCHED_IDLE, and its autogroup at nice 19.

    Every probe question is type ANY (RFC 6762 §8.1), and avahi-daemon takes each QM one by
    walking its whole cache (passive observation of failures, avahi_cache_start_poof): at
    2,000 hosts/s, 12,000 questions/s, which took more than half of this machine's two cores
    from the proxy under test (perf, stop 54). On a real link that device has a CPU of its own.
    The autogroup matters: the lab starts each daemon in a session of its own, and with
    sched_autogroup_enabled the kernel shares the CPU between sessions first, so SCHED_IDLE
    alone still left the device half the machine (0.9 of a core, the proxy 0.9). What the
    device cannot read, the kernel drops, as a slow device's would be. Its CPU time is
    reported beside the proxy's."""

    def __init__(self, device):
        self.device = device
        self.autogroup = "/proc/%d/autogroup" % device

    def _nice(self, value):
        try:
            with open(self.autogroup, "w") as f:
                f.write(str(value))
        except OSError:
            pass   # no autogroups in this kernel: SCHED_IDLE is enough

    def __enter__(self):
        os.sched_setscheduler(self.device, os.SCHED_IDLE, os.sched_param(0))
        self._nice(19)
        return self

    def __exit__(self, *exc):
        self._nice(0)
        os.sched_setscheduler(self.device, os.SCHED_OTHER, os.sched_param(0))
        return False


def _cpu(b):
    """CPU seconds so far of the proxy, the client link's device and the router's avahi-daemon,
    and of each of the proxy's threads ("thread NAME TID")."""
    used = {name: probes.cpu_seconds(b.pid(name)) for name in ("srp-proxy", "srp-avahi-c", "srp-avahi-r")}
    tasks = "/proc/%d/task" % b.pid("srp-proxy")
    for tid in os.listdir(tasks):
        try:
            with open(os.path.join(tasks, tid, "comm")) as f:
                comm = f.read().strip()
            used["thread %s %s" % (comm, tid)] = probes.cpu_seconds("%d/task/%s" % (b.pid("srp-proxy"), tid))
        except OSError:
            pass   # ended meanwhile
    return used


class KeepWarm:
    """Asks the mix every 20 s, so that the proxy keeps its browses of it (browse-idle-timeout
    120 s) through the run: the N-registration run is then of cache hits too, whatever
    avahi-daemon is doing by then."""

    def __init__(self):
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.wait(20.0):
            for q in dict.fromkeys(_mix()):
                for port in (PORT, REF_PORT):
                    _ask(*q, timeout=1.0, port=port)

    def stop(self):
        self.stopping.set()
        self.thread.join(10)


def _drain(limit=60.0):
    start = time.monotonic()
    while time.monotonic() - start < limit:
        t0 = time.perf_counter()
        r = _ask(ZONE, "SOA", timeout=2.0)
        if r is not None and time.perf_counter() - t0 < 0.02:
            return
        time.sleep(0.2)


# --------------------------------------------------------------------------- 3. visibility
class AvahiWatch:
    """`avahi-browse -p TYPE` on the client link, each line timestamped as it is read."""

    def __init__(self, b, stype):
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=b.dbus_c)
        self.proc = subprocess.Popen(["ip", "netns", "exec", NS_SC, "stdbuf", "-oL", "avahi-browse", "-p", stype],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
                                     start_new_session=True, text=True)
        self.seen = {}
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            t = time.perf_counter()
            f = line.rstrip("\n").split(";")
            if f[0] == "+" and len(f) >= 4:
                self.seen.setdefault(L.avahi_unescape(f[3]), t)

    def stop(self):
        L.kill_pid(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            L.kill_pid(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


class PTRPoll:
    """A unicast client on the client link asking the proxy for TYPE's PTR over TCP every
    `interval` seconds; the first time each instance is in the answer, timestamped."""

    def __init__(self, stype, interval=0.005):
        self.name = "%s.%s" % (stype, ZONE)
        self.interval = interval
        self.seen = {}
        self.queries = 0
        self.failures = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        with L.netns(NS_SC):   # this thread stays in the client namespace
            while not self.stopping.is_set():
                q = dns.message.make_query(self.name, "PTR", use_edns=0, payload=1232)
                try:
                    r = dns.query.tcp(q, ROUTER, port=PORT, timeout=2, source=CLIENT)
                    t = time.perf_counter()
                    for rrset in r.answer:
                        if rrset.rdtype == dns.rdatatype.PTR:
                            for rd in rrset:
                                inst = rd.target.labels[0].decode("utf-8", "replace")
                                self.seen.setdefault(inst, t)
                except Exception:  # noqa: BLE001 - counted
                    self.failures += 1
                self.queries += 1
                self.stopping.wait(self.interval)

    def stop(self):
        self.stopping.set()
        self.thread.join(5)


def visibility(b, sizes, updates, log):
    """One registration at a time: NOERROR, then when avahi-browse on the client link and the
    proxy's unicast PTR answer first show it."""
    watch = AvahiWatch(b, VIS_TYPE)
    poll = PTRPoll(VIS_TYPE)
    time.sleep(2.0)   # the browse on the client and the proxy's browse of the link are up
    with L.netns(NS_SC):
        sock = srp_load.open_sockets([CLIENT])[0]
    samples = []
    try:
        for i, (wire, _k, _r) in enumerate(updates):
            label = "Vis %05d" % i
            t0 = time.perf_counter()
            sock.sendto(wire, (ROUTER, PORT))
            reply, deadline = None, t0 + 10
            while time.perf_counter() < deadline:
                try:
                    reply = sock.recv(4096)
                    break
                except BlockingIOError:
                    time.sleep(0.0005)
            t1 = time.perf_counter()
            rcode = None if reply is None else reply[3] & 0x0F
            end = t1 + 10
            while time.perf_counter() < end and not (label in watch.seen and label in poll.seen):
                time.sleep(0.005)
            a, u = watch.seen.get(label), poll.seen.get(label)
            samples.append(dict(rcode=rcode, answer_s=t1 - t0, mdns_s=None if a is None else a - t1,
                                unicast_s=None if u is None else u - t1))
            time.sleep(0.3)
    finally:
        sock.close()
        watch.stop()
        poll.stop()
    log("    visibility: %d registrations, %d unicast polls (%d failed)" % (len(samples), poll.queries, poll.failures))
    return samples, poll


# --------------------------------------------------------------------------- 2. and 4. load
def _send(b, wires, concurrency, limit):
    """One stream of updates, the client link's device yielding the CPU meanwhile (`DeviceYields`)."""
    with L.netns(NS_SC):
        socks = srp_load.open_sockets(SOURCES)
    try:
        with b.device_yields():
            return srp_load.blast(wires, socks, (ROUTER, PORT), concurrency, limit,
                                  reply_timeout=b.sizes.reply_timeout)
    finally:
        for s in socks:
            s.close()


class QueryProbe:
    """An ordinary client on the link: one UDP query (benchclient's A, a cache hit) to the
    proxy's link address every 10 ms, each answer's time kept; the listener the updates use."""

    def __init__(self):
        self.latencies, self.lost = [], 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        q = dns.message.make_query("benchclient." + ZONE, "A", use_edns=0, payload=1232)
        with L.netns(NS_SC):
            while not self.stopping.is_set():
                t0 = time.perf_counter()
                try:
                    dns.query.udp(q, ROUTER, port=PORT, timeout=2, source=CLIENT)
                    self.latencies.append(time.perf_counter() - t0)
                except Exception:  # noqa: BLE001 - counted
                    self.lost += 1
                self.stopping.wait(0.01)

    def stop(self):
        self.stopping.set()
        self.thread.join(5)
        return dict(n=len(self.latencies), lost=self.lost, p50_ms=_pct_ms(self.latencies, 50),
                    p99_ms=_pct_ms(self.latencies, 99), max_ms=ms(max(self.latencies)) if self.latencies else None)


def _pct_ms(values, p):
    return ms(dnsperf.percentile(values, p)) if values else None


def _rate_rows(report, label, res, note_extra="", judged=True):
    ok = res["rcodes"].get("NOERROR", 0)
    others = ", ".join("%s %d" % (k, v) for k, v in sorted(res["rcodes"].items()) if k != "NOERROR")
    report.row(SECTION, "%s: registrations/s" % label, res["ok_rate"], "/s",
               target=">= %d/s" % TARGET_RATE if judged else "",
               ok=res["ok_rate"] >= TARGET_RATE if judged else None,
               note="%d NOERROR of %d sent in %.1f s%s; %d outstanding at most%s%s" % (
                   ok, res["sent"], res["elapsed"], (", " + others) if others else "", res["concurrency"],
                   ", stopped by the %d s limit" % res["time_limit"] if res["stopped_by_time"] else "", note_extra))
    report.row(SECTION, "%s: answer p50 / p95" % label, "%.1f / %.1f" % (
        _pct_ms(res["latencies"], 50) or 0, _pct_ms(res["latencies"], 95) or 0), "ms")


def _settle(b, limit=60.0):
    return probes.settle([b.pid("srp-avahi-r"), b.pid("srp-avahi-c"), b.pid("srp-proxy")], busy=0.1, limit=limit)


def _snapshot(b):
    return dict(proxy_kib=probes.rss_kib(b.pid("srp-proxy")), avahi_kib=probes.rss_kib(b.pid("srp-avahi-r")),
                dbus_kib=probes.rss_kib(b.pid("srp-dbus-r")), disk=b.disk(),
                hosts=_metric(b, "srp_registered_hosts"), store_bytes=_metric(b, "srp_store_bytes"),
                stalls=b.lab.log_text("srp-proxy", 10 ** 7).count("avahi-daemon is not answering"))


def _metric(b, name):
    try:
        text = b.metrics()
    except Exception:  # noqa: BLE001
        return None
    vals = [float(m.group(1)) for m in re.finditer(r"^%s(?:\{[^}]*\})?\s+([\d.e+-]+)" % re.escape(name), text, re.M)]
    return sum(vals) if vals else None


# --------------------------------------------------------------------------- the row
def run(report, binary, log, smoke=False, hosts=None, growth_seconds=None):
    sizes = Sizes(smoke, hosts, growth_seconds)
    workdir = tempfile.mkdtemp(prefix="dpt-srp-bench-")
    details = dict(sizes=dict(sizes.__dict__))
    try:
        log("l. srp: SIG(0) verification, one core")
        details["verify"] = verification(report, sizes, workdir, log)
        t0 = time.monotonic()
        u = dict(vis=srp_load.sign([_spec(i, "vis", VIS_TYPE, "Vis", msg_id=60000 + i)
                                    for i in range(sizes.visibility)]),
                 new=srp_load.sign([_spec(i, "bench", LOAD_TYPE, "Bench") for i in range(sizes.hosts)]))
        key = [k for _w, k, _r in u["new"]]

        def renewal(i, msg_id):
            """The same content, signed again (another message ID) with the host's key."""
            return _spec(i, "bench", LOAD_TYPE, "Bench", key=key[i], msg_id=msg_id)
        u["renew_small"] = srp_load.sign([renewal(i, 20000 + p * sizes.small + i)
                                          for p in range(sizes.small_passes) for i in range(sizes.small)])
        u["renew_first"] = srp_load.sign([renewal(i, 40000 + i) for i in range(sizes.first)])
        u["renew_last"] = srp_load.sign([renewal(i, 40000 + j)
                                         for j, i in enumerate(range(sizes.hosts - sizes.first, sizes.hosts))])
        log("l. srp: %d updates signed in %.1f s (a key per host), before any timing" % (
            sum(len(v) for v in u.values()), time.monotonic() - t0))
        _measure(report, binary, log, sizes, details, workdir, u)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report.detail("srp", details)


def _wires(updates):
    return [w for w, _k, _r in updates]


def _measure(report, binary, log, sizes, details, workdir, u):
    lab_ = L.Lab()
    os.makedirs(lab_.dir, exist_ok=True)
    b = BenchLab(lab_, binary, sizes)
    try:
        log("l. srp: lab (router and client link, dbus, two avahi-daemons), proxy")
        b.start()
        b.start_proxy()
        b.start_reference()
        time.sleep(1.0)
        # One registration by the lab's requester itself, as the integration test does.
        rcode, _opt = b.register("requester", key="r", instance="Requester", service="_srpcheck._tcp", port=1)
        if rcode != "NOERROR":
            raise RuntimeError("srp_update.py got %s; proxy log:\n%s" % (rcode, lab_.log_text("srp-proxy", 40)))
        idle = _snapshot(b)
        details["idle"] = idle

        log("l. srp: cache-hit UDP qps, no registration but the requester's")
        q0, tries0 = cache_hits(b, sizes, workdir, "0 hosts", log)
        warm = KeepWarm()

        log("l. srp: NOERROR to visible, %d registrations one at a time" % len(u["vis"]))
        samples, _poll = visibility(b, sizes, u["vis"], log)
        details["visibility"] = samples
        _visibility_rows(report, samples)

        # New hosts 0..small, then renewals of those few: the cost of one update when the
        # table is small.
        log("l. srp: new hosts 0 to %d, then %d renewals of them" % (sizes.small, len(u["renew_small"])))
        small = _send(b, _wires(u["new"][:sizes.small]), sizes.new_concurrency, sizes.phase_limit)
        details["new_small"] = _strip(small)
        _settle(b, limit=20)
        ren_small = _send(b, _wires(u["renew_small"]), sizes.renew_concurrency, sizes.phase_limit)
        log("    %s in %.1f s: %.0f/s" % (ren_small["rcodes"], ren_small["elapsed"], ren_small["ok_rate"]))
        details["renew_small"] = _strip(ren_small)

        log("l. srp: new hosts %d to %d, %d outstanding at most, %d s at most" % (
            sizes.small, sizes.first, sizes.new_concurrency, sizes.phase_limit))
        first = _send(b, _wires(u["new"][sizes.small:sizes.first]), sizes.new_concurrency, sizes.phase_limit)
        log("    %s in %.1f s: %.0f/s" % (first["rcodes"], first["elapsed"], first["ok_rate"]))
        details["new_first"] = _strip(first)
        settle_s = _settle(b)

        log("l. srp: %d renewals (same content) at %d hosts, an ordinary client asking meanwhile" % (
            sizes.first, sizes.first))
        probe = QueryProbe()
        time.sleep(3.0)
        quiet = list(probe.latencies)
        ren = _send(b, _wires(u["renew_first"]), sizes.renew_concurrency, sizes.phase_limit)
        busy_from = len(quiet)
        during = probe.stop()
        busy = probe.latencies[busy_from:]
        log("    %s in %.1f s: %.0f/s" % (ren["rcodes"], ren["elapsed"], ren["ok_rate"]))
        details["renew_first"] = _strip(ren)
        details["query_probe"] = dict(quiet=_lat(quiet), during_renewals=_lat(busy), all=during)

        _rate_rows(report, "new hosts, %d to %d" % (sizes.small, sizes.first), first,
                   "; all outstanding at once, each answered after the responder's probe (RFC 6762 §8.1: "
                   "about 1 s) or the 1.3 s wait: one probe's second bounds this burst; the sustained rate "
                   "is the growth rows'", judged=False)
        _rate_rows(report, "renewals at %d hosts" % sizes.small, ren_small,
                   "; each host %d times, signed anew each time" % sizes.small_passes)
        _rate_rows(report, "renewals at %d hosts" % sizes.first, ren,
                   "; nothing published: SIG(0), table, one SQLite commit each; %.0f s to settle before" % settle_s)
        report.row(SECTION, "cache-hit query during those renewals p50 / p99 / max", "%.2f / %.1f / %.0f" % (
            _lat(busy)["p50_ms"] or 0, _lat(busy)["p99_ms"] or 0, _lat(busy)["max_ms"] or 0), "ms",
            note="one A query every 10 ms from the link to the address the updates use; the 3 s before: "
                 "%.2f / %.1f / %.0f ms; %d lost" % (_lat(quiet)["p50_ms"] or 0, _lat(quiet)["p99_ms"] or 0,
                                                    _lat(quiet)["max_ms"] or 0, during["lost"]))

        growth = []
        mid = None
        done = sizes.first
        started = time.monotonic()
        for cp in sizes.checkpoints:
            left = sizes.growth_limit - (time.monotonic() - started)
            if left <= 1:
                break
            log("l. srp: new hosts %d to %d (%.0f s left of %d)" % (done, cp, left, sizes.growth_limit))
            cpu0 = _cpu(b)
            res = _send(b, _wires(u["new"][done:cp]), sizes.new_concurrency, left)
            cpu = {name: used - cpu0.get(name, 0.0) for name, used in _cpu(b).items()}
            res["cpu_seconds"] = cpu
            busiest = max((kv for kv in cpu.items() if kv[0].startswith("thread ")), key=lambda kv: kv[1],
                          default=("thread -", 0.0))
            ok = res["rcodes"].get("NOERROR", 0)
            log("    %s in %.1f s: %.0f/s; CPU s: %s" % (res["rcodes"], res["elapsed"], res["ok_rate"], ", ".join(
                "%s %.2f" % kv for kv in cpu.items() if kv[1] >= 0.05)))
            _settle(b, limit=30)
            snap = _snapshot(b)
            growth.append(dict(start=done, end=cp, result=_strip(res), snapshot=snap))
            if res.get("full_rate") is not None:
                report.row(SECTION, "new hosts, %d to %d, %d outstanding throughout: registrations/s" % (
                    done, done + res["sent"], sizes.new_concurrency), res["full_rate"], "/s",
                    target=">= %d/s" % TARGET_RATE, ok=res["full_rate"] >= TARGET_RATE,
                    note="NOERROR answers from the first answer to the last update sent, over that time: the "
                         "sustained rate, without the first answer's probe second and the last one's; the client "
                         "link's avahi-daemon yields the CPU meanwhile (DeviceYields)")
            if ok:
                report.row(SECTION, "new hosts, %d to %d: proxy CPU per new host" % (done, done + res["sent"]),
                           cpu["srp-proxy"] / ok * 1e6, "us",
                           note="the proxy's user + system time over the stream / NOERROR (all its threads: SIG(0), "
                                "store, responder, listeners); over the %.1f s: proxy %.2f (its busiest thread, "
                                "%s, %.2f), the client link's avahi-daemon %.2f, the router's %.2f cores" % (
                                    res["elapsed"], cpu["srp-proxy"] / res["elapsed"], busiest[0].split()[1],
                                    busiest[1] / res["elapsed"], cpu["srp-avahi-c"] / res["elapsed"],
                                    cpu["srp-avahi-r"] / res["elapsed"]))
            report.row(SECTION, "new hosts, %d to %d: registrations/s" % (done, done + res["sent"]),
                       res["ok_rate"], "/s",
                       note="%d NOERROR of %d sent in %.1f s (%s); p50/p95 %.0f/%.0f ms%s; proxy %.1f MiB, "
                            "avahi-daemon %.1f MiB after; 'avahi-daemon is not answering' in the proxy log: %d" % (
                           ok, res["sent"], res["elapsed"],
                           ", ".join("%s %d" % kv for kv in sorted(res["rcodes"].items())),
                           _pct_ms(res["latencies"], 50) or 0, _pct_ms(res["latencies"], 95) or 0,
                           "; stopped by the time limit" if res["stopped_by_time"] else "",
                           snap["proxy_kib"] / 1024.0, snap["avahi_kib"] / 1024.0, snap["stalls"]))
            done += res["sent"]
            if mid is None and not res["stopped_by_time"]:
                # Cache hits at the first stretch's end too: in the full runs here avahi-daemon
                # stopped answering past ~5,000 hosts, and the end's figure then says that.
                t0 = time.monotonic()
                log("l. srp: cache-hit UDP qps with %d registrations" % done)
                mid = (done,) + cache_hits(b, sizes, workdir, "%d hosts" % done, log)
                started += time.monotonic() - t0   # not counted in the growth time
            if res["stopped_by_time"] or ok < res["sent"] * 0.5:
                break
        details["growth"] = growth
        registered = int(_metric(b, "srp_registered_hosts") or 0)
        final = _snapshot(b)
        details["final"] = final

        if done >= sizes.hosts:
            wires, label = _wires(u["renew_last"]), "renewals at %d hosts" % registered
        else:
            wires = _wires(u["renew_first"])
            label = "renewals at %d hosts (of the first %d)" % (registered, sizes.first)
        log("l. srp: %s, %d s at most" % (label, sizes.renew_n_limit))
        ren_n = _send(b, wires, sizes.renew_concurrency, sizes.renew_n_limit)
        log("    %s in %.1f s: %.0f/s" % (ren_n["rcodes"], ren_n["elapsed"], ren_n["ok_rate"]))
        details["renew_n"] = _strip(ren_n)
        _rate_rows(report, label, ren_n)

        _footprint_rows(report, idle, final, registered, b)

        log("l. srp: cache-hit UDP qps with %d registrations" % registered)
        _settle(b, limit=45)
        warm.stop()
        qn, triesn = cache_hits(b, sizes, workdir, "%d hosts" % registered, log)
        details["cache_hits"] = dict(zero=tries0, n=triesn, registered=registered,
                                     mid=None if mid is None else dict(hosts=mid[0], tries=mid[2]))
        report.row(SECTION, "cache-hit UDP qps, 0 registrations", q0["qps"], "qps",
                   note="dnsperf, best of -c 1 -q 100 / -c 4 -q 200, %d s each: PTR, SRV, TXT, A, AAAA of %d services "
                        "on the client link's avahi-daemon; %d lost; %d B per answer; the reference's best %.0f" % (
                            sizes.dnsperf_seconds, MIX_COUNT, q0["lost"], q0["response_size"] or 0,
                            q0["reference_best"]))
        report.row(SECTION, "cache-hit qps, 0 registrations / reference", q0["vs_reference"], "x",
                   note="the method's own precision: the same binary, the registrar on and empty, against the "
                        "reference (registrar off) in the same alternating runs")
        for hosts, q in ([(mid[0], mid[1])] if mid else []) + [(registered, qn)]:
            report.row(SECTION, "cache-hit UDP qps, %d registrations" % hosts, q["qps"], "qps",
                       note="same mix, its browses kept (a query every 20 s); %d lost; %d of %d mix queries unanswered "
                            "after warming; %d B per answer; the reference's best %.0f" % (
                                q["lost"], q["unanswered_after_warming"], len(set(_mix())), q["response_size"] or 0,
                                q["reference_best"]))
            ratio = q["vs_reference"]
            report.row(SECTION, "cache-hit qps, %d registrations / reference" % hosts, ratio, "x",
                       target="~1.0 (unchanged, >= 0.9)", ok=None if ratio is None else ratio >= 0.9,
                       note="mean qps over the reference's (registrar off, the same binary, running beside it), "
                            "runs alternating proxy, reference, reference, proxy at each dnsperf setting; against "
                            "0 registrations at the start: %.2fx" % (q["qps"] / q0["qps"] if q0["qps"] else 0))

        problems = b.log_problems()
        details["log_problems"] = problems[-200:]
        report.row(SECTION, "proxy log: warning/error lines", len(problems), "",
                   note="; ".join(_short(p) for p in _distinct(problems)[:3]))
        answered = {}
        for m in re.finditer(r'^srp_updates_total\{rcode="([^"]+)"\}\s+([\d.e+]+)', b.metrics(), re.M):
            answered[m.group(1)] = int(float(m.group(2)))
        details["srp_updates_total"] = answered
        avahi_problems = [line for line in lab_.log_text("srp-avahi-r", 100000).splitlines()
                          if re.search(r"(?i)fail|error|refus|too many|limit", line)]
        details["avahi_log_problems"] = avahi_problems[-50:]
        if avahi_problems:
            report.row(SECTION, "router avahi-daemon log: failure lines", len(avahi_problems), "",
                       note="; ".join(_short(p) for p in _distinct(avahi_problems)[:2]))
        # SIGTERM: the proxy withdraws its groups (frees its avahi client) and exits.
        t0 = time.monotonic()
        proc = lab_.procs["srp-proxy"]
        L.kill_pid(proc.pid, signal.SIGTERM)
        try:
            code = proc.wait(30)
        except subprocess.TimeoutExpired:
            code = None
        stop_s = time.monotonic() - t0
        details["proxy_stop"] = dict(seconds=stop_s, exit=code)
        report.row(SECTION, "SIGTERM to exit at %d hosts" % registered, stop_s, "s",
                   note="exit status %s" % ("none within 30 s" if code is None else code))
        log("    proxy exited %s %.1f s after SIGTERM (%d groups)" % (code, stop_s, registered))
    except BaseException:
        lab_.dump_logs([n for n in ("srp-proxy", "srp-avahi-r") if n in lab_.logs], tail=40)
        raise
    finally:
        b.stop()
        lab_.stop()


def _lat(values):
    return dict(n=len(values), p50_ms=_pct_ms(values, 50), p99_ms=_pct_ms(values, 99),
                max_ms=ms(max(values)) if values else None)


def _visibility_rows(report, samples):
    ok = [s for s in samples if s["rcode"] == 0]
    mdns = [s["mdns_s"] for s in ok if s["mdns_s"] is not None]
    uni = [s["unicast_s"] for s in ok if s["unicast_s"] is not None]
    ans = [s["answer_s"] for s in ok]
    report.row(SECTION, "NOERROR to seen by avahi-browse (client link) p50 / p95", "%.1f / %.1f" % (
        _pct_ms(mdns, 50) or 0, _pct_ms(mdns, 95) or 0), "ms",
        note="%d of %d registrations seen; negative: the client saw the announcement before the answer arrived "
             "(the responder announces once the probe is won, the answer waits for the store)" % (
                 len(mdns), len(samples)))
    report.row(SECTION, "NOERROR to PTR answer from the proxy p50 / p95", "%.1f / %.1f" % (
        _pct_ms(uni, 50) or 0, _pct_ms(uni, 95) or 0), "ms",
        note="%d of %d seen; a client on the link polling %s PTR over TCP every 5 ms (its browse warm)" % (
            len(uni), len(samples), VIS_TYPE))
    report.row(SECTION, "update to NOERROR, new host alone p50 / p95", "%.0f / %.0f" % (
        _pct_ms(ans, 50) or 0, _pct_ms(ans, 95) or 0), "ms",
        note="the registrar waits for its responder's probe (RFC 6762 §8.1: 0-250 ms, 3 x 250 ms) or 1.3 s")


def _footprint_rows(report, idle, final, registered, b):
    if registered <= 0:
        return
    per = (final["proxy_kib"] - idle["proxy_kib"]) * 1024.0 / registered
    report.row(SECTION, "proxy RSS at %d hosts" % registered, final["proxy_kib"] / 1024.0, "MiB",
               note="%.1f MiB with one host (the requester's)" % (idle["proxy_kib"] / 1024.0))
    report.row(SECTION, "proxy RSS per registered host", per, "B",
               note="(RSS at N - RSS at 1) / N; each host: 1 A, 1 service (SRV, TXT of 2 strings, PTR)")
    disk = final["disk"]
    total = disk["db"] + disk["-wal"]
    report.row(SECTION, "store file + -wal at %d hosts" % registered, total / 1e6, "MB",
               note="db %d, -wal %d, -shm %d octets on disk (ext4); the -wal stays near 4 MB: SQLite's "
                    "checkpoint at 1000 pages" % (disk["db"], disk["-wal"], disk["-shm"]))
    logical = final.get("store_bytes") or 0
    report.row(SECTION, "store per registered host", logical / registered, "B",
               note="srp_store_bytes (pages in use x page size, what the proxy reports) / hosts: a host, its "
                    "service and two claims, four rows")
    avahi = (final["avahi_kib"] - idle["avahi_kib"]) * 1024.0 / registered
    report.row(SECTION, "context: the router avahi-daemon's RSS per host", avahi, "B",
               note="%.1f MiB at %d hosts (registrations are not its: ~0 expected); dbus-daemon %.1f MiB" % (
                   final["avahi_kib"] / 1024.0, registered, final["dbus_kib"] / 1024.0))


def _strip(res):
    r = dict(res)
    lat = r.pop("latencies")
    r["p50_s"] = dnsperf.percentile(lat, 50)
    r["p95_s"] = dnsperf.percentile(lat, 95)
    r["max_s"] = max(lat) if lat else None
    r["mean_s"] = statistics.mean(lat) if lat else None
    return r


def _short(line, width=120):
    return line if len(line) <= width else line[:width] + "..."


def _distinct(lines):
    seen, out = set(), []
    for line in lines:
        key = re.sub(r"\d+", "#", line)[30:110]
        if key not in seen:
            seen.add(key)
            out.append(line)
    return out
