"""A python-zeroconf ServiceBrowser, the way Home Assistant and many IoT stacks browse: mDNS
only, on one interface. Used by test_gateway.py inside the client namespace.

    gateway_browser.py ADDRESS TYPE SECONDS   browse for SECONDS, then print one JSON object
                                              per instance found (name, port, server,
                                              addresses, TXT as hex), resolved by mDNS
    gateway_browser.py ADDRESS TYPE watch     print "+ NAME TIME" / "- NAME TIME" lines as
                                              instances come and go, until killed

ADDRESS is the interface's IPv4 address (zeroconf binds its sockets to it).
"""

import json
import sys
import time

from zeroconf import IPVersion, ServiceBrowser, ServiceStateChange, Zeroconf


def main():
    address, stype, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    stype = stype.rstrip(".") + ".local."
    zc = Zeroconf(interfaces=[address], ip_version=IPVersion.V4Only)
    names = set()

    def changed(zeroconf, service_type, name, state_change):
        if state_change is ServiceStateChange.Added:
            names.add(name)
        elif state_change is ServiceStateChange.Removed:
            names.discard(name)
        if mode == "watch" and state_change is not ServiceStateChange.Updated:
            sign = "+" if state_change is ServiceStateChange.Added else "-"
            print("%s %s %.3f" % (sign, name, time.time()), flush=True)

    ServiceBrowser(zc, stype, handlers=[changed])
    if mode == "watch":
        print("ready %.3f" % time.time(), flush=True)
        while True:
            time.sleep(3600)
    time.sleep(float(mode))
    base = stype.split("._sub.", 1)[-1]  # a subtype browse lists instances of the base type
    for name in sorted(names):
        info = zc.get_service_info(base, name, timeout=3000)
        if info is None:
            print(json.dumps({"name": name, "resolved": False}), flush=True)
            continue
        print(json.dumps({
            "name": name, "resolved": True, "port": info.port, "server": info.server,
            "addresses": sorted(info.parsed_addresses()), "txt": (info.text or b"").hex(),
        }), flush=True)
    zc.close()


if __name__ == "__main__":
    main()
