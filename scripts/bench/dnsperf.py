"""dnsperf runs in the router namespace, and the figures parsed from its report."""

from __future__ import annotations

import math
import re
import subprocess
import tempfile

import dns.message

import lab


def write_queries(path, queries):
    """dnsperf data file in its binary form (-B: 2-byte length + message), built with
    dnspython, because dnsperf's text form mangles \\DDD escapes such as the \\032 of
    instance names with spaces. Every query has EDNS0 with a 1232-byte payload (RFC 6891)."""
    with open(path, "wb") as f:
        for name, rtype in queries:
            wire = dns.message.make_query(name, rtype, use_edns=0, payload=1232).to_wire()
            f.write(len(wire).to_bytes(2, "big") + wire)
    return path


def _field(text, pattern, cast=float, default=None):
    m = re.search(pattern, text, re.MULTILINE)
    return cast(m.group(1)) if m else default


def parse(text):
    """The summary of one dnsperf run (and per-query latencies in seconds when run with -v)."""
    out = {
        "sent": _field(text, r"^\s*Queries sent:\s+(\d+)", int, 0),
        "completed": _field(text, r"^\s*Queries completed:\s+(\d+)", int, 0),
        "lost": _field(text, r"^\s*Queries lost:\s+(\d+)", int, 0),
        "qps": _field(text, r"^\s*Queries per second:\s+([\d.]+)", float, 0.0),
        "avg_latency_s": _field(text, r"^\s*Average Latency \(s\):\s+([\d.]+)"),
        "response_size": _field(text, r"response (\d+)", int),
        "rcodes": _field(text, r"^[ \t]*Response codes:[ \t]+(.*)$", str, ""),
    }
    # -v: "> NOERROR binary input 0.000123" for each answer (dnsperf 2.x, -B)
    lat = []
    for line in text.splitlines():
        if line.startswith("> "):
            parts = line.split()
            try:
                lat.append(float(parts[-1]))
            except (ValueError, IndexError):
                pass
    out["latencies"] = lat
    return out


def run(port, datafile, seconds, mode="udp", clients=1, outstanding=100, qps=None,
        verbose=False, server="127.0.0.1", cpu=None, ns=None):
    """One dnsperf run against server:port; returns parse() plus the settings used. `cpu`
    pins dnsperf to that CPU (taskset); `ns` is its namespace (default the lab's router). Its report goes to a file, not a pipe: with -v it
    writes a line per answer, and a pipe the reader drains late stalls its receive thread,
    which would be counted as the server's latency."""
    cmd = ["dnsperf", "-s", server, "-p", str(port), "-d", datafile, "-B", "-m", mode,
           "-c", str(clients), "-q", str(outstanding), "-l", str(seconds), "-t", "2"]
    if qps:
        cmd += ["-Q", str(int(qps))]
    if verbose:
        cmd += ["-v"]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    with tempfile.TemporaryFile("w+") as out:
        p = subprocess.run(["ip", "netns", "exec", ns or lab.NS_R] + cmd, stdout=out, stderr=subprocess.STDOUT,
                           timeout=seconds + 60)
        out.seek(0)
        text = out.read()
    if p.returncode != 0 or "Queries per second" not in text:
        raise RuntimeError("dnsperf failed (exit %d): %s\n%s" % (p.returncode, " ".join(cmd), text[-4000:]))
    res = parse(text)
    res.update(mode=mode, clients=clients, outstanding=outstanding, seconds=seconds,
               qps_limit=qps, port=port, cpu=cpu)
    return res


def percentile(values, p):
    """Nearest-rank percentile (p in 0..100) of a list; None when empty."""
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, math.ceil(p / 100.0 * len(v)) - 1))
    return v[k]
