"""perf profile of the main proxy under the UDP cache-hit mix (bench.py --profile DIR)."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time

import benchsite
import dnsperf
import lab
import probes

# Inclusive-cost lines worth printing: the proxy's own code and the libldns encoder.
OWN_CODE = ("DiscoveryProxy", "Message.", "LDNSMessageEncoder", "DNSName", "UDPDNSHandler",
            "ldns_", "Browse", "Catalog")


def _report(data, children):
    cmd = ["perf", "report", "-i", data, "--stdio", "--sort", "symbol", "-g", "none",
           "--percent-limit", "0.5", "--children" if children else "--no-children"]
    text = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          timeout=600).stdout
    try:  # Swift symbols are mangled in perf's output
        text = subprocess.run(["swift", "demangle", "--simplified"], input=text, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, timeout=120, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pass
    # "  8.35%  [.] swift_retain   -  -" -> "8.35% [.] swift_retain"
    lines = [re.sub(r"(\s+-)+\s*$", "", " ".join(line.split()))
             for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return text, lines


def record(run, out_dir, seconds=5):
    """perf record with DWARF call graphs (libldns has no frame pointers) at 499 Hz of
    cpu-clock (this VM has no hardware counters), while dnsperf drives the proxy at its
    best UDP setting. Writes perf.data, perf-self.txt and perf-inclusive.txt."""
    os.makedirs(out_dir, exist_ok=True)
    data = os.path.join(out_dir, "perf.data")
    b = run.udp_best
    load = {}
    t = threading.Thread(target=lambda: load.update(dnsperf.run(
        run.main.port, run.mixfile, seconds + 4, clients=b["clients"], outstanding=b["outstanding"])))
    t.start()
    time.sleep(2)
    lab.run(["perf", "record", "-e", "cpu-clock", "-F", "499", "--call-graph", "dwarf,16384",
             "-o", data, "-p", str(run.main.pid), "--", "sleep", str(seconds)], timeout=seconds + 120)
    t.join()
    probes.drain(run.main.port, benchsite.ZONE)
    files = {}
    for name, children in (("perf-self.txt", False), ("perf-inclusive.txt", True)):
        text, lines = _report(data, children)
        files[name] = lines
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(text)
    own = [line for line in files["perf-inclusive.txt"] if any(k in line for k in OWN_CODE)]
    run.report.meta["profile"] = dict(dir=out_dir, udp_qps_during=load.get("qps"),
                                      self_top=files["perf-self.txt"][:20], inclusive_own=own[:20])
    run.log("    profile in %s (%.0f qps while recording); self cost:" % (out_dir, load.get("qps") or 0))
    for line in files["perf-self.txt"][:20]:
        run.log("      " + line)
    run.log("    inclusive cost (children), the proxy's code and libldns:")
    for line in own[:20]:
        run.log("      " + line)
