"""The benchmark's synthetic site: what the far link publishes and what is asked.

Everything lives on lab link 2 (zone lab2.example.), answered by responder.py (python-
zeroconf) in the far namespace, beside the lab's own avahi-daemon there. SRV targets are
hosts with A and AAAA records in documentation ranges (RFC 5737 198.51.100.0/24,
RFC 3849 2001:db8::/32)."""

from __future__ import annotations

import json
import os
import select
import subprocess
from dataclasses import dataclass, field

import lab
from resolver_lab import RESOLVERS

HERE = os.path.dirname(os.path.abspath(__file__))
ZONE = lab.ZONE2


@dataclass(frozen=True)
class Sizes:
    """How big each part of the run is; `full()` is the documented run, `smoke()` the CI one."""
    site_types: int
    site_instances: int          # per site type
    hosts: int
    cold_types: int              # per probe (proxy, avahi-browse, paired, optimistic)
    scale_counts: tuple          # instances of one type for the scaling rows
    memory_counts: tuple         # instances known for the memory rows (first = the site)
    tcp_held: int                # concurrent TCP connections held open
    dnsperf_seconds: int
    dnsperf_settings: tuple      # (clients, outstanding) pairs tried for peak qps
    latency_seconds: int
    scale_seconds: int
    scale_rounds: int            # interleaved smallest/largest re-runs for the flatness ratio
    resolver_types: int          # fresh types per recursive resolver (row g), and for avahi-browse

    @staticmethod
    def full():
        return Sizes(site_types=20, site_instances=25, hosts=50, cold_types=40,
                     scale_counts=(1, 10, 100, 1000), memory_counts=(500, 5000), tcp_held=1000,
                     dnsperf_seconds=8, dnsperf_settings=((1, 100), (4, 200), (8, 500)),
                     latency_seconds=10, scale_seconds=5, scale_rounds=3, resolver_types=20)

    @staticmethod
    def smoke():
        return Sizes(site_types=2, site_instances=3, hosts=2, cold_types=3,
                     scale_counts=(1, 10), memory_counts=(6, 30), tcp_held=20,
                     dnsperf_seconds=1, dnsperf_settings=((2, 100),),
                     latency_seconds=1, scale_seconds=1, scale_rounds=1, resolver_types=2)


@dataclass(frozen=True)
class Service:
    name: str
    stype: str       # "_bt07._tcp"
    port: int
    host: str        # "bh03" (published as bh03.local.)
    txt: tuple       # strings


@dataclass
class Site:
    sizes: Sizes
    services: list = field(default_factory=list)
    hosts: list = field(default_factory=list)          # host labels
    site_types: list = field(default_factory=list)
    cold_proxy_types: list = field(default_factory=list)
    cold_avahi_types: list = field(default_factory=list)
    cold_paired_types: list = field(default_factory=list)  # asked of avahi-browse and the proxy at once
    optimistic_types: list = field(default_factory=list)
    scale_types: dict = field(default_factory=dict)    # count -> type
    memory_types: list = field(default_factory=list)   # types beyond the site, 25 instances each
    resolver_types: dict = field(default_factory=dict)  # resolver kind -> fresh types asked through it
    resolver_avahi_types: list = field(default_factory=list)  # fresh types for avahi-browse (row g)

    def of_type(self, stype):
        return [s for s in self.services if s.stype == stype]

    def of_types(self, stypes):
        return [s for s in self.services if s.stype in stypes]


def host_addresses(index):
    return "198.51.100.%d" % (100 + index), "2001:db8:2::%d" % (100 + index)


def build(sizes: Sizes) -> Site:
    site = Site(sizes)
    site.hosts = ["bh%02d" % h for h in range(sizes.hosts)]
    port = 20000

    def add(stype, count, label, start=0):
        nonlocal port
        for i in range(count):
            n = start + i
            host = site.hosts[n % len(site.hosts)]
            txt = ("txtvers=1", "model=Bench %s" % label,
                   "path=/%s/%d" % (stype.split(".")[0].lstrip("_"), i),
                   "note=unit %d of %s" % (i, label))
            site.services.append(Service("%s Unit %02d" % (label, i), stype, port, host, txt))
            port += 1

    for t in range(sizes.site_types):
        stype = "_bt%02d._tcp" % t
        site.site_types.append(stype)
        add(stype, sizes.site_instances, "Site %02d" % t, start=t * sizes.site_instances)
    for prefix, target in (("_bc", site.cold_proxy_types), ("_ba", site.cold_avahi_types),
                           ("_bp", site.cold_paired_types), ("_bo", site.optimistic_types)):
        for t in range(sizes.cold_types):
            stype = "%s%02d._tcp" % (prefix, t)
            target.append(stype)
            add(stype, 2, "Cold %s %02d" % (prefix[1:], t))
    for r, kind in enumerate(RESOLVERS):
        site.resolver_types[kind] = []
        for t in range(sizes.resolver_types):
            stype = "_br%d%02d._tcp" % (r, t)
            site.resolver_types[kind].append(stype)
            add(stype, 2, "Res %s %02d" % (kind, t))
    for t in range(sizes.resolver_types):
        stype = "_bra%02d._tcp" % t
        site.resolver_avahi_types.append(stype)
        add(stype, 2, "Res avahi %02d" % t)
    for count in sizes.scale_counts:
        stype = "_bs%d._tcp" % count
        site.scale_types[count] = stype
        add(stype, count, "Scale %d" % count)
    known = sizes.site_types * sizes.site_instances
    extra = max(0, sizes.memory_counts[-1] - known)
    per_type = max(1, sizes.site_instances)
    for t in range((extra + per_type - 1) // per_type):
        stype = "_bm%03d._tcp" % t
        site.memory_types.append(stype)
        add(stype, min(per_type, extra - t * per_type), "Mem %03d" % t)
    return site


def lab_options():
    """Keyword arguments for lab.Lab(): a router avahi-daemon whose cache holds every record
    of the run (avahi's default is 4096 entries per interface)."""
    return dict(avahi_options={"avahi-r": ["cache-entries-max=65536"]})


def start_responder(lab_, site: Site, timeout=120):
    """responder.py in the far namespace of link 2, answering for every service of the site."""
    spec = [dict(name=s.name, type=s.stype, port=s.port, host=s.host, txt=list(s.txt),
                 addresses=list(host_addresses(site.hosts.index(s.host))))
            for s in site.services]
    path = os.path.join(lab_.dir, "bench-services.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    p = lab_.spawn(lab.NS_L2, ["/usr/bin/python3", os.path.join(HERE, "responder.py"),
                               "--iface", lab.L2_IF, "--addr", lab.L2_V4, "--services", path],
                   "bench-responder", stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ready():
        lab_.check_alive("bench-responder")
        if not select.select([p.stdout], [], [], 1.0)[0]:
            return False
        line = p.stdout.readline().decode()
        if not line.startswith("READY"):
            raise RuntimeError("bench responder: %r" % line)
        return True
    lab.wait_for(ready, timeout, what="the bench responder to register %d services" % len(spec))
    return p


def instance_name(service: Service, zone=ZONE):
    """Presentation form of the instance's owner name (spaces as \\032, RFC 1035 §5.1)."""
    return "%s.%s.%s" % (service.name.replace(" ", "\\032"), service.stype, zone)


def learn_queries(services, zone=ZONE, with_hosts=True):
    """(name, type) that make the proxy know each instance: browse PTR once per type,
    SRV and TXT per instance, A and AAAA per host used."""
    qs, types, hosts = [], [], []
    for s in services:
        if s.stype not in types:
            types.append(s.stype)
        if s.host not in hosts:
            hosts.append(s.host)
    qs += [("%s.%s" % (t, zone), "PTR") for t in types]
    for s in services:
        qs += [(instance_name(s, zone), "SRV"), (instance_name(s, zone), "TXT")]
    if with_hosts:
        for h in hosts:
            qs += [("%s.%s" % (h, zone), "A"), ("%s.%s" % (h, zone), "AAAA")]
    return qs


def mix_queries(services, zone=ZONE, ptr_weight=5):
    """The cache-hit mix for dnsperf: every learn query, browse PTRs repeated
    `ptr_weight` times (browses are what clients send most)."""
    qs = learn_queries(services, zone)
    ptrs = [q for q in qs if q[1] == "PTR"]
    return qs + ptrs * (ptr_weight - 1)
