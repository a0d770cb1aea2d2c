"""Proxy instances for the benchmark, started in the lab's router namespace."""

from __future__ import annotations

import os
import re

import lab

# Ports in the router namespace: DNS on PORT, admin on PORT + 3000 (the lab's rule).
MAIN_PORT, OPTIMISTIC_PORT, MEMORY_PORT, NOREPLAY_PORT, FOOTPRINT_PORT, SLOW_PORT = 5300, 5301, 5302, 5303, 5304, 5305

# Limits raised so that the set-up itself is not throttled: warming 5000 instances
# starts ~10000 mDNS queries (default 20/s per link, RFC 8766 §9.3) and uses more avahi
# objects than the default budget; 1000 TCP connections from one client address need a
# per-client limit above the default 64, and an idle timeout longer than the scaling run.
# 5000 instances fully known (PTR, SRV, TXT) are ~10000 live browses: above the default
# max-browses of 4096, which would evict and so understate the memory row.
CONFIG = """\
links: []
mdns-query-rate: 2000
mdns-query-burst: 4000
max-browses: 16384
browse-idle-timeout: {idle}
tcp:
  idle-timeout: 600
  max-connections: 4096
  max-connections-per-client: 4096
avahi:
  objects-per-client: 900
  object-budget: 32768
"""


class Proxy:
    def __init__(self, lab_, binary, port, name, idle_timeout=600, extra_args=(), extra_config="", links=None):
        """`links`: [(interface, zone)] instead of the lab's two links."""
        self.lab, self.binary, self.port, self.name = lab_, binary, port, name
        self.links = links
        self.admin_port = port + 3000
        self.config = os.path.join(lab_.dir, "%s.yaml" % name)
        with open(self.config, "w") as f:
            f.write(CONFIG.format(idle=idle_timeout) + extra_config)
        self.args = ["--config", self.config] + list(extra_args)
        self.proc = None

    def start(self, timeout=30):
        """`timeout`: seconds to wait for its first answer (longer under a profiler)."""
        args = self.args
        if self.links is not None:
            args = [a for interface, zone in self.links for a in ("--link", "%s=%s" % (interface, zone))] + args
        self.proc = self.lab.start_proxy(args, name=self.name, port=self.port, v6=False, binary=self.binary,
                                         log_level="notice", links=self.links is None,
                                         apex=self.links[0][1] if self.links else lab.ZONE1, timeout=timeout)
        return self

    @property
    def pid(self):
        """`ip netns exec` execs the proxy, so the child's pid is the proxy's."""
        exe = os.path.basename(os.readlink("/proc/%d/exe" % self.proc.pid))
        if exe != os.path.basename(self.binary):
            raise RuntimeError("pid %d is %s, not the proxy" % (self.proc.pid, exe))
        return self.proc.pid

    def effective_config(self):
        """`--check-config` output for the same arguments (what the proxy really uses)."""
        cmd = [self.binary, "--link", "%s=%s" % (lab.R_IF1, lab.ZONE1),
               "--link", "%s=%s" % (lab.R_IF2, lab.ZONE2),
               "--server-name", lab.SERVER_NAME] + self.args + ["--check-config"]
        return lab.nsrun(lab.NS_R, cmd).stdout

    def collection_window_ms(self):
        m = re.search(r"^collection-window-ms:\s*(\d+)", self.effective_config(), re.MULTILINE)
        if not m:
            raise RuntimeError("--check-config printed no collection-window-ms")
        return int(m.group(1))

    def stop(self):
        self.lab.stop_proc(self.name)
        if self.lab.proxy is self.proc:
            self.lab.proxy = None
