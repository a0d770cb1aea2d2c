"""Devices of one service type that answer mDNS at different times, on the lab's link 1
(late_devices.py in lab.NS_L1), for the slow-links tests and measurements."""

from __future__ import annotations

import contextlib
import os
import select
import subprocess
import sys
import time

import lab as L
from helpers import name, unique

HERE = os.path.dirname(os.path.abspath(__file__))
PROC = "late-devices"
DEVICE_NAMES = "abcdefghijklmnopqrstuvwxyz"


@contextlib.contextmanager
def late_devices(lab, delays_ms=(30, 250, 600), prefix="ld"):
    """One device per entry of `delays_ms` (named a, b, c, ...), each answering a query for
    a fresh service type that many milliseconds after it. Nothing is published through
    avahi and nothing announces, so the router's avahi-daemon has nothing cached: the first
    browse crosses the link. Yields (type label such as "_ld0123abcdef", the instance names
    in zone 1 as dns.name.Name); the responder is stopped after the body. Its log (each
    answer and how late it was sent) is lab.log_text("late-devices")."""
    stype = "_" + unique(prefix).replace("-", "")[:14]      # a label of at most 15 octets
    devices = DEVICE_NAMES[:len(delays_ms)]
    cmd = [sys.executable, os.path.join(HERE, "late_devices.py"), "--iface", L.L1_IF,
           "--type", stype + "._tcp"]
    for dev, ms in zip(devices, delays_ms):
        cmd += ["--device", "%s:%d" % (dev, ms)]
    proc = lab.spawn(L.NS_L1, cmd, PROC, stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 15
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _w, _x = select.select([proc.stdout], [], [], max(0.0, left))
            chunk = proc.stdout.read1(256) if ready else b""
            if not chunk:
                raise RuntimeError("late_devices.py did not get ready (%s):\n%s" % (
                    "exited %s" % proc.poll() if ready else "no line in 15 s", lab.log_text(PROC)))
            line += chunk
        if line.strip() != b"late-devices: ready":
            raise RuntimeError("late_devices.py said %r:\n%s" % (line, lab.log_text(PROC)))
        yield stype, {name(dev, stype, "_tcp") for dev in devices}
    finally:
        lab.stop_proc(PROC)
        if proc.stdout is not None:
            proc.stdout.close()
