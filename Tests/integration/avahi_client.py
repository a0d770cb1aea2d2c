"""avahi-daemon as a wide-area (unicast DNS) DNS-SD client inside one network namespace.

Used by test_resolver_clients.py: an avahi-daemon we did not write browses and resolves
link zones through the site's recursive resolver, the way a Linux desktop would.

The daemon gets its own dbus-daemon (a private "system bus" on a unix socket in the lab's
directory, as lab.Lab has for the router) and is started with ``ip netns exec NS``, so it reads the
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

import lab as L


class AvahiClient:
    """One wide-area avahi-daemon and its private dbus-daemon in namespace `ns`, run as
    processes `<name>` and `<name>-dbus` of the lab (lab.Lab.spawn_avahi / spawn_dbus)."""

    def __init__(self, lab, ns, name="avahi-c", allow_interfaces=(), browse_domains=()):
        self.lab = lab
        self.ns = ns
        self.name = name
        self.allow_interfaces = list(allow_interfaces)
        self.browse_domains = list(browse_domains)
        self.dbus_addr = "unix:path=%s" % os.path.join(lab.dir, name + "-dbus.sock")

    def config_text(self):
        extra = ["browse-domains=%s" % ", ".join(self.browse_domains)] if self.browse_domains else []
        return self.lab._avahi_conf("dpt-client", self.allow_interfaces, dbus=True, publish=False,
                                    extra=extra, wide_area=True)

    def start(self, timeout=20):
        self.lab.spawn_dbus(self.ns, self.name + "-dbus", self.dbus_addr)
        self.lab.spawn_avahi(self.ns, self.name, self.config_text(), dbus_addr=self.dbus_addr,
                             debug=True)
        self.lab.wait_avahi_on_bus(self.ns, self.name, self.dbus_addr, timeout)
        return self

    def stop(self):
        self.lab.stop_proc(self.name)
        self.lab.stop_proc(self.name + "-dbus")

    def log_text(self, tail=200):
        return self.lab.log_text(self.name, tail)

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
