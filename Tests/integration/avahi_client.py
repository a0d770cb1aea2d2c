"""avahi-daemon as a wide-area (unicast DNS) DNS-SD client inside one network namespace.

Used by test_resolver_clients.py: an avahi-daemon we did not write browses and resolves
link zones through the site's recursive resolver, the way a Linux desktop would.

The daemon gets its own dbus-daemon (a private "system bus" on a unix socket in `workdir`,
like lab.Lab does for the router) and is started with ``ip netns exec NS``, so it reads the
namespace's /etc/netns/NS/resolv.conf bind-mounted over /etc/resolv.conf.

avahi settings that matter for wide-area browsing (avahi 0.8; avahi-core/wide-area.c,
browse.c, browse-domain.c, avahi-daemon/main.c; each checked in the lab):

* ``[wide-area] enable-wide-area=yes``: without it avahi has no unicast DNS engine and every
  lookup goes out as mDNS; ``avahi-browse -d lab1.example`` then lists nothing, silently.
* The unicast DNS server is *not* an avahi setting: avahi-daemon takes the ``nameserver``
  lines (at most 4) of /etc/resolv.conf at start-up and on SIGHUP.  A lookup uses unicast
  DNS only if there is such a server and the name does not end in .local,
  254.169.in-addr.arpa or 8.e.f.ip6.arpa; otherwise it is mDNS (again: no error, just
  nothing).  So the namespace's resolv.conf must name the resolver before the daemon
  starts.  ``ip netns exec`` bind-mounts /etc/netns/NS/resolv.conf over /etc/resolv.conf.
* ``use-ipv4=yes`` (``use-ipv6`` for an IPv6 nameserver): avahi opens its unicast query
  socket only for an enabled family; with use-ipv4=no an IPv4 nameserver is never asked.
* ``search``/``domain`` lines of resolv.conf are added to the *static* browse domains
  (avahi-browse -D prints ``example.``, dot included), next to ``browse-domains=`` from the
  config file.  avahi-browse itself never browses them: it browses ``local`` unless given
  ``-d``.  Turning the search domain into link zones takes a domain browser in it:
  ``avahi-browse -D -d example`` asks b._dns-sd._udp.example. PTR (through the resolver)
  and prints lab1.example and lab2.example.  A domain found that way that is also a
  configured browse-domain is reported once, as the static one.
* ``browse-domains=lab1.example`` (README's advice for Linux clients) only adds lab1.example
  to what ``avahi-browse -D`` reports; browsing ``-d lab1.example`` works without it.
* ``disable-publishing=yes``: the client only queries.  ``allow-interfaces`` = the client's
  own link; mDNS plays no part in lookups under lab1.example.
* ``enable-dbus=yes`` (default) with DBUS_SYSTEM_BUS_ADDRESS pointing at the private bus
  (avahi-browse talks to the daemon over D-Bus); ``--no-chroot --no-drop-root`` and a
  private /run, as lab.py starts its avahi-daemons.

Limits of avahi's wide-area client, useful when reading failures:

* one UDP query per (name, type) with RD=1, no EDNS, no TCP: answers are capped at 512
  bytes.  A resolver truncates bigger ones (Unbound: TC and no records, avahi says "Not
  found"; BIND: TC with the first 21 of link 2's 64 _bulk._tcp PTRs, and avahi lists those
  21 but cannot resolve any of them, their ~700-byte TXT records being truncated too).
* retransmitted 0.5 s and 1.5 s after the first send; with a single nameserver the lookup
  *fails* ("Timeout reached") 2.5 s after the first send.  An answer the proxy holds back
  longer (the RFC 8766 6 s negative timeout) never reaches avahi in time.
* a response with RCODE != 0 or ANCOUNT == 0 is a failure of that lookup ("Not found");
  records of all sections go into avahi's wide-area cache.
* no polling: a browse shows what the one answer contained.  avahi-browse -p prints
  ``n/a`` as interface and protocol for wide-area results.
"""

from __future__ import annotations

import os
import re
import subprocess

import lab as L


class AvahiClient:
    def __init__(self, ns, workdir, name="avahi-c", allow_interfaces=(), browse_domains=(),
                 extra_server=()):
        self.ns = ns
        self.dir = os.path.join(workdir, name)
        self.name = name
        self.allow_interfaces = list(allow_interfaces)
        self.browse_domains = list(browse_domains)
        self.extra_server = list(extra_server)
        self.bus_socket = os.path.join(self.dir, "dbus.sock")
        self.dbus_addr = "unix:path=%s" % self.bus_socket
        self.procs = {}
        self.logs = {}
        os.makedirs(self.dir, exist_ok=True)

    # ---- processes ---------------------------------------------------------
    def _spawn(self, key, cmd, env_extra=None):
        log = os.path.join(self.dir, key + ".log")
        env = dict(os.environ)
        env.update(env_extra or {})
        with open(log, "ab") as lf:
            p = subprocess.Popen(["ip", "netns", "exec", self.ns] + list(cmd), env=env,
                                 stdin=subprocess.DEVNULL, stdout=lf, stderr=lf,
                                 start_new_session=True)
        self.procs[key] = p
        self.logs[key] = log
        return p

    def log_text(self, key="avahi-daemon", tail=200):
        path = self.logs.get(key)
        if not path or not os.path.exists(path):
            return ""
        with open(path, "rb") as f:
            return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-tail:])

    def check_alive(self):
        for key, p in self.procs.items():
            if p.poll() is not None:
                raise RuntimeError("%s in %s exited (%s):\n%s" % (key, self.ns, p.returncode,
                                                                  self.log_text(key)))

    def _dbus(self):
        conf = L.private_system_bus_config(self.dbus_addr)
        path = os.path.join(self.dir, "dbus-system.conf")
        with open(path, "w") as f:
            f.write(conf)
        self._spawn("dbus-daemon", ["dbus-daemon", "--nofork", "--nopidfile",
                                    "--config-file=" + path])
        L.wait_for(lambda: self.check_alive() is None and os.path.exists(self.bus_socket), 10,
                   what="dbus-daemon socket in %s" % self.ns)

    def config_text(self):
        lines = ["[server]",
                 "host-name=dpt-client",
                 "domain-name=local",
                 "use-ipv4=yes",
                 "use-ipv6=yes",
                 "enable-dbus=yes"]
        if self.allow_interfaces:
            lines.append("allow-interfaces=%s" % ",".join(self.allow_interfaces))
        if self.browse_domains:
            lines.append("browse-domains=%s" % ", ".join(self.browse_domains))
        lines += self.extra_server
        lines += ["",
                  "[wide-area]",
                  "enable-wide-area=yes",
                  "",
                  "[publish]",
                  "disable-publishing=yes",
                  "",
                  "[reflector]",
                  "enable-reflector=no",
                  ""]
        return "\n".join(lines)

    def start(self, timeout=20):
        self._dbus()
        conf = os.path.join(self.dir, "avahi-daemon.conf")
        with open(conf, "w") as f:
            f.write(self.config_text())
        # A private /run keeps the pid file and socket apart from any other avahi-daemon;
        # an empty services directory: the client publishes nothing.
        svc = os.path.join(self.dir, "services")
        os.makedirs(svc, exist_ok=True)
        script = ("set -e; mount -t tmpfs tmpfs /run; mkdir -p /run/avahi-daemon; "
                  "mount --bind '%s' /etc/avahi/services; "
                  "exec avahi-daemon --no-chroot --no-drop-root --no-rlimits --debug -f '%s'"
                  % (svc, conf))
        # `ip netns exec` runs the command in a mount namespace of its own (that is how it
        # bind-mounts /etc/netns/NS/resolv.conf), so these mounts vanish with the daemon.
        self._spawn("avahi-daemon", ["sh", "-c", script],
                    env_extra={"DBUS_SYSTEM_BUS_ADDRESS": self.dbus_addr})
        L.wait_for(lambda: self.check_alive() is None and self.run_tool(
                       ["avahi-browse", "-p", "-t", "-k", "_none._tcp"], timeout=10).returncode == 0,
                   timeout, interval=0.5, what="avahi-daemon in %s on D-Bus" % self.ns)
        return self

    def stop(self):
        for key in ("avahi-daemon", "dbus-daemon"):
            p = self.procs.get(key)
            if p is None:
                continue
            if p.poll() is None:
                L.kill_pid(p.pid)
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    L.kill_pid(p.pid, 9)
                    p.wait(3)

    # ---- tools -------------------------------------------------------------
    def run_tool(self, cmd, timeout=30):
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.dbus_addr)
        return L.nsrun(self.ns, cmd, check=False, timeout=timeout, env=env)

    def browse(self, stype, domain, resolve=True, timeout=30):
        """`avahi-browse -p -t -k [-r] -d DOMAIN STYPE` (-k: print the type as _ipp._tcp, not
        "Internet Printer"): (CompletedProcess, added, resolved) with
        added = [(iface, proto, name, type, domain)] ('+' lines) and
        resolved = [(name, type, domain, host, address, port, [txt strings])] ('=' lines)."""
        cmd = ["avahi-browse", "-p", "-t", "-k"] + (["-r"] if resolve else []) + ["-d", domain, stype]
        r = self.run_tool(cmd, timeout=timeout)
        return (r,) + parse_browse(r.stdout)

    def browse_domains_of(self, domain=None, timeout=30):
        """`avahi-browse -D -p -t [-d DOMAIN]`: the browse domains avahi reports."""
        cmd = ["avahi-browse", "-D", "-p", "-t"] + (["-d", domain] if domain else [])
        r = self.run_tool(cmd, timeout=timeout)
        doms = [L.avahi_unescape(f.split(";")[3]) for f in r.stdout.splitlines()
                if f.startswith("+;") and len(f.split(";")) >= 4]
        return r, doms


_TXT_RE = re.compile(r'"((?:[^"\\]|\\.)*)"')


def parse_txt(field):
    """avahi-browse -p prints TXT as space-separated quoted strings: "a=b" "c"."""
    return [m.group(1) for m in _TXT_RE.finditer(field)]


def parse_browse(out):
    added, resolved = [], []
    for line in out.splitlines():
        f = line.split(";")
        if f[0] == "+" and len(f) >= 6:
            added.append((f[1], f[2], L.avahi_unescape(f[3]), f[4], f[5]))
        elif f[0] == "=" and len(f) >= 10:
            resolved.append((L.avahi_unescape(f[3]), f[4], f[5], f[6], f[7], int(f[8]),
                             parse_txt(";".join(f[9:]))))
    return added, resolved
