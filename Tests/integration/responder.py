#!/usr/bin/python3
"""python-zeroconf mDNS responder for the far side of link 1 (run inside dpt-l1).

Publishes the services of lab.ZC_SERVICES (names with dots, spaces and UTF-8,
large / binary / empty TXT, a host with link-local + routable addresses).
Control on stdin, one command a line, each answered on stdout:
    add NAME      -> "OK added NAME"
    remove NAME   -> "OK removed NAME"   (sends mDNS goodbyes)
    publish JSON  -> "OK published KEY"  a service not in ZC_SERVICES (soak, flap tests):
                     {"name", "type", "port", "txt": [strings], "host"}; KEY is "name.type"
    unpublish KEY -> "OK unpublished KEY"
    quit          -> exits
Prints "READY" once every service is registered.
"""

import argparse
import asyncio
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab  # noqa: E402
from zeroconf import IPVersion, ServiceInfo  # noqa: E402
from zeroconf.asyncio import AsyncZeroconf  # noqa: E402


def make_info(name):
    stype, port, host, txt = lab.ZC_SERVICES[name]
    return ServiceInfo(
        stype + ".local.", "%s.%s.local." % (name, stype), port=port,
        properties=txt, server=host + ".local.",
        parsed_addresses=lab.ZC_HOSTS[host])


def say(s):
    sys.stdout.write(s + "\n")
    sys.stdout.flush()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iface", required=True)
    ap.add_argument("--addr", required=True)
    args = ap.parse_args()
    ifindex = socket.if_nametoindex(args.iface)
    azc = AsyncZeroconf(interfaces=[args.addr, ifindex], ip_version=IPVersion.All)
    registered = {}

    async def add(name):
        info = make_info(name)
        task = await azc.async_register_service(info)
        await task
        registered[name] = info

    async def remove(name):
        info = registered.pop(name)
        task = await azc.async_unregister_service(info)
        await task

    async def publish(spec):
        d = json.loads(spec)
        host = d.get("host", lab.ZC_HOST)
        info = ServiceInfo(
            d["type"] + ".local.", "%s.%s.local." % (d["name"], d["type"]), port=d["port"],
            properties=b"".join(bytes([len(t)]) + t for t in (s.encode() for s in d["txt"])),
            server=host + ".local.", parsed_addresses=lab.ZC_HOSTS[host])
        key = "%s.%s" % (d["name"], d["type"])
        await (await azc.async_register_service(info))
        registered[key] = info
        return key

    await asyncio.gather(*(add(n) for n in lab.ZC_SERVICES))
    say("READY")

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            break
        cmd, _sp, arg = line.decode("utf-8").strip().partition(" ")
        try:
            if cmd == "add":
                await add(arg)
                say("OK added " + arg)
            elif cmd == "remove":
                await remove(arg)
                say("OK removed " + arg)
            elif cmd == "publish":
                say("OK published " + await publish(arg))
            elif cmd == "unpublish":
                await remove(arg)
                say("OK unpublished " + arg)
            elif cmd == "quit":
                say("OK quit")
                break
            else:
                say("ERR unknown command " + cmd)
        except Exception as e:  # noqa: BLE001 - reported to the controller
            say("ERR %r" % (e,))
    await azc.async_unregister_all_services()
    await azc.async_close()


if __name__ == "__main__":
    asyncio.run(main())
