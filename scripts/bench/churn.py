#!/usr/bin/python3
"""Far-link churn for the gateway row (run inside the far namespace): registers COUNT
instances spread over TYPES service types with python-zeroconf (probe and announce, as a real
device does), one every INTERVAL seconds (registrations overlap), waits SETTLE seconds, then
unregisters (goodbye) every other one, one every INTERVAL seconds, waits SETTLE again and
prints the instances it withdrew, then "done". Closing sends goodbyes for the rest; those
come after the row's watchers stop, so they are not goodbyes to time. The times that matter
are read from a capture of the far link (the first announcement and the goodbye of each
instance), not from here.

    churn.py ADDRESS TYPES COUNT INTERVAL SETTLE
"""

import asyncio
import sys

from zeroconf import IPVersion, ServiceInfo
from zeroconf.asyncio import AsyncZeroconf


async def main():
    address, types, count, interval, settle = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), \
        float(sys.argv[4]), float(sys.argv[5])
    azc = AsyncZeroconf(interfaces=[address], ip_version=IPVersion.V4Only)
    infos, tasks = [], []
    for i in range(count):
        stype = types[i % len(types)]
        info = ServiceInfo(stype + ".local.", "Churn %03d.%s.local." % (i, stype), port=20000 + i,
                           properties={"i": str(i), "path": "/churn/%d" % i},
                           server="churn-far.local.", parsed_addresses=[address])
        infos.append(info)
        tasks.append(asyncio.ensure_future(azc.async_register_service(info, allow_name_change=False)))
        await asyncio.sleep(interval)
    for task in tasks:
        await (await task)
    await asyncio.sleep(settle)
    goodbyes = []
    for info in infos[::2]:
        goodbyes.append(await azc.async_unregister_service(info))
        await asyncio.sleep(interval)
    for goodbye in goodbyes:
        await goodbye
    await asyncio.sleep(settle)
    print("withdrawn " + ",".join(info.name.split(".")[0] for info in infos[::2]), flush=True)
    print("done", flush=True)
    await azc.async_close()


if __name__ == "__main__":
    asyncio.run(main())
