#!/usr/bin/python3
"""python-zeroconf responder for the benchmark's site (run inside the far namespace of link 2).

Reads the services from a JSON file (name, type, port, host, txt strings, addresses) and
answers mDNS for them. The services are put straight into zeroconf's registry, without
probing or announcing: thousands of instances are answerable at once (avahi-daemon needs
about ten minutes to probe and announce 6000 static services on this machine), and the
router's avahi-daemon learns each record only when asked, as on a quiet network.
Prints "READY <count>" when done and exits when stdin closes.
"""

import argparse
import asyncio
import json
import socket
import sys

from zeroconf import IPVersion, ServiceInfo
from zeroconf.asyncio import AsyncZeroconf


def say(s):
    sys.stdout.write(s + "\n")
    sys.stdout.flush()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iface", required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--services", required=True, help="JSON list of services")
    args = ap.parse_args()
    with open(args.services) as f:
        services = json.load(f)
    ifindex = socket.if_nametoindex(args.iface)
    azc = AsyncZeroconf(interfaces=[args.addr, ifindex], ip_version=IPVersion.All)
    for s in services:
        info = ServiceInfo(
            s["type"] + ".local.", "%s.%s.local." % (s["name"], s["type"]), port=s["port"],
            properties=b"".join(bytes([len(t)]) + t for t in (x.encode() for x in s["txt"])),
            server=s["host"] + ".local.", parsed_addresses=s["addresses"])
        azc.zeroconf.registry.async_add(info)
    say("READY %d" % len(services))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        pass
    await azc.async_close()


if __name__ == "__main__":
    asyncio.run(main())
