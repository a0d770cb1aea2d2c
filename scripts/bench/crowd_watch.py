#!/usr/bin/python3
"""The client of the gateway scale bench (gateway_scale.py): a python-zeroconf ServiceBrowser
on the client link, as Home Assistant and many IoT stacks browse (mDNS only, one interface),
that notes when it first sees each instance. Run inside the client namespace.

    crowd_watch.py ADDRESS TYPE SAMPLE LIMIT

ADDRESS is the interface's IPv4 address (zeroconf binds to it). Prints ``ready T``, then
``seen T NAME`` at the first "Added" of each instance (T: time.time() in the browser's
handler, so a browser that falls behind shows as late sights, which is what a real client
would live with). Later changes (the crowd's churn) print ``removed T NAME`` at each
"Removed" of an instance it had, and ``added T NAME`` at each "Added" after a removal (the
first "Added" stays a ``seen`` line, and there is only ever one ``seen`` line per
instance). On SIGUSR1 it resolves up to SAMPLE of the instances seen (spread evenly
over their sorted names, 10 at a time, 3 s each: that is a client opening the printer
dialog) and prints one ``resolved JSON`` line for each, then ``done`` and exits. It exits 0
on SIGTERM, and by itself after LIMIT seconds (the bench stops it long before).
"""

import json
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from zeroconf import IPVersion, ServiceBrowser, ServiceStateChange, Zeroconf

RESOLVE_THREADS = 10
RESOLVE_TIMEOUT_MS = 3000


def main():
    address, stype, sample, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    stype = stype.rstrip(".") + ".local."
    zc = Zeroconf(interfaces=[address], ip_version=IPVersion.V4Only)
    seen = set()
    present = set()
    lock = threading.Lock()

    def changed(zeroconf, service_type, name, state_change):
        if state_change is ServiceStateChange.Removed:
            with lock:
                if name not in present:
                    return
                present.discard(name)
            print("removed %.3f %s" % (time.time(), name), flush=True)
            return
        if state_change is not ServiceStateChange.Added:
            return
        with lock:
            if name in present:
                return
            present.add(name)
            word = "added" if name in seen else "seen"
            seen.add(name)
        print("%s %.3f %s" % (word, time.time(), name), flush=True)

    resolve = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_a: resolve.set())
    signal.signal(signal.SIGTERM, lambda *_a: sys.exit(0))
    ServiceBrowser(zc, stype, handlers=[changed])
    print("ready %.3f" % time.time(), flush=True)
    if not resolve.wait(limit):
        zc.close()
        return 0
    with lock:
        names = sorted(seen)
    step = max(1, len(names) // sample) if sample else 0
    chosen = names[::step][:sample] if step else []

    def one(name):
        info = zc.get_service_info(stype, name, timeout=RESOLVE_TIMEOUT_MS)
        if info is None:
            return {"name": name, "resolved": False}
        return {"name": name, "resolved": True, "port": info.port, "server": info.server,
                "addresses": sorted(info.parsed_addresses()), "txt": (info.text or b"").hex()}
    with ThreadPoolExecutor(RESOLVE_THREADS) as pool:
        for result in pool.map(one, chosen):
            print("resolved " + json.dumps(result), flush=True)
    print("done", flush=True)
    zc.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
