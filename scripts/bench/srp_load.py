"""Signed SRP updates made before a timed run, and the sender that times them (row l. srp).

The updates are scripts/srp/srp_update.py's own (`build` and `sign`, what its --hex prints),
made in worker processes before any clock starts, each host with a key of its own. The
sender keeps at most `concurrency` updates outstanding over UDP, spread over one socket per
source address, for at most `time_limit` seconds, and records each answer's RCODE and time."""

from __future__ import annotations

import multiprocessing
import os
import selectors
import socket
import sys
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "srp"))

import srp_update  # noqa: E402

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED", 6: "YXDOMAIN"}


class Spec(SimpleNamespace):
    """One update: host label, instance label, service type, port, TXT, address, message ID,
    and the private key's scalar (None: a fresh key)."""


def _sign_batch(specs):
    from cryptography.hazmat.primitives.asymmetric import ec
    out = []
    for s in specs:
        if s.key is None:
            key = ec.generate_private_key(ec.SECP256R1())
        else:
            key = ec.derive_private_key(s.key, ec.SECP256R1())
        args = SimpleNamespace(
            zone=s.zone, host=s.host, service=[s.service], instance=[s.instance], subtype=[], remove=False,
            port=s.port, txt=list(s.txt), ttl=120, address=[s.address], lease=s.lease, key_lease=1209600, id=s.id)
        update, host = srp_update.build(args, key)
        wire = srp_update.sign(update.to_wire(), key, host)
        out.append((wire, key.private_numbers().private_value, srp_update.key_rdata(key)))
    return out


def sign(specs, processes=None):
    """[(wire, key scalar, KEY rdata)] for `specs`, in order, signed in worker processes."""
    processes = processes or max(1, os.cpu_count() or 1)
    chunk = max(1, (len(specs) + processes * 4 - 1) // (processes * 4))
    batches = [specs[i:i + chunk] for i in range(0, len(specs), chunk)]
    if processes == 1 or len(batches) == 1:
        return [x for b in batches for x in _sign_batch(b)]
    with multiprocessing.get_context("fork").Pool(processes) as pool:
        results = pool.map(_sign_batch, batches)
    return [x for b in results for x in b]


def open_sockets(addresses):
    """One UDP socket per source address (call inside the client namespace)."""
    socks = []
    for a in addresses:
        s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_DGRAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        s.bind((a, 0))
        s.setblocking(False)
        socks.append(s)
    return socks


def blast(wires, socks, server, concurrency, time_limit, reply_timeout=10.0):
    """Sends `wires` (update i from socket i % len(socks); message IDs unique per socket among
    those outstanding) keeping at most `concurrency` outstanding, starting no new one after
    `time_limit` seconds and waiting at most `reply_timeout` for each answer. Returns a dict:
    sent, answered, rcodes {name: count}, latencies (s, answered ones), elapsed (first send to
    last answer), ok_rate (NOERROR per second over elapsed), and full_rate: NOERROR per second
    from the first answer to the last send, the stretch where `concurrency` updates were
    outstanding all along (the sustained rate, without the first answer's wait and the last
    one's tail); None when that stretch is under a second."""
    n = len(wires)
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
    pending = {}            # (socket index, id) -> update index
    sent_at = [0.0] * n
    latency = [None] * n
    rcode = [None] * n
    nxt = 0
    start = time.perf_counter()
    deadline = start + time_limit
    last_answer = start
    last_sweep = start
    first_answer = None
    last_send = start
    answered_at = []        # NOERROR answers' times
    try:
        while True:
            now = time.perf_counter()
            while len(pending) < concurrency and nxt < n and now < deadline:
                si = nxt % len(socks)
                wire = wires[nxt]
                mid = wire[0] << 8 | wire[1]
                try:
                    socks[si].sendto(wire, server)
                except BlockingIOError:
                    break
                pending[(si, mid)] = nxt
                sent_at[nxt] = last_send = time.perf_counter()
                nxt += 1
            if not pending and (nxt >= n or now >= deadline):
                break
            for key, _ev in sel.select(timeout=0.02):
                s, si = key.fileobj, key.data
                while True:
                    try:
                        data = s.recv(4096)
                    except BlockingIOError:
                        break
                    if len(data) < 12:
                        continue
                    idx = pending.pop((si, data[0] << 8 | data[1]), None)
                    if idx is None:
                        continue
                    t = time.perf_counter()
                    latency[idx] = t - sent_at[idx]
                    rcode[idx] = data[3] & 0x0F
                    last_answer = t
                    if first_answer is None:
                        first_answer = t
                    if rcode[idx] == 0:
                        answered_at.append(t)
            now = time.perf_counter()
            if now - last_sweep > 0.25:
                last_sweep = now
                for k, idx in list(pending.items()):
                    if now - sent_at[idx] > reply_timeout:
                        del pending[k]
    finally:
        sel.close()
    counts = {}
    for i in range(nxt):
        name = "no answer" if rcode[i] is None else RCODES.get(rcode[i], str(rcode[i]))
        counts[name] = counts.get(name, 0) + 1
    elapsed = max(1e-9, last_answer - start)
    ok = counts.get("NOERROR", 0)
    full_rate = None
    if first_answer is not None and last_send - first_answer >= 1.0:
        full_rate = sum(1 for t in answered_at if first_answer <= t <= last_send) / (last_send - first_answer)
    return dict(full_rate=full_rate, sent=nxt, answered=sum(1 for r in rcode if r is not None), rcodes=counts,
                latencies=[latency[i] for i in range(nxt) if latency[i] is not None and rcode[i] == 0],
                elapsed=elapsed, ok_rate=ok / elapsed, concurrency=concurrency, time_limit=time_limit,
                stopped_by_time=nxt < n)
