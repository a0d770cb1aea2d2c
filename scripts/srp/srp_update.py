#!/usr/bin/python3
"""An SRP requester's update (RFC 9665), built with Debian's dnspython and cryptography: the
lab's stand-in for a Thread or Matter device, and the source of the unit tests' signed updates.

dnspython 2.3 has no SIG(0) and no KEY type, so both are generic RDATA (types 24 and 25) and the
signature is made here as RFC 2931 §3.1 says and BIND's nsupdate does: ECDSA P-256 with SHA-256
(RFC 6605) over the SIG RDATA without its signature, then the message before the SIG was added.
`verify` checks a message the same way, so a message nsupdate signed checks this construction.

    srp_update.py --host printer --zone default.service.arpa. --address 2001:db8::5 \
        --service _ipp._tcp --instance "Printer 1" --port 631 --txt rp=ipp/print \
        [--lease 7200 --key-lease 1209600] [--key-file k.pem] [--server 127.0.0.1 --port53 53 [--tcp]]
prints the response's RCODE and lease option, or with --hex the update's octets.
"""
import argparse
import os
import socket
import struct
import sys
import time

import dns.edns
import dns.message
import dns.name
import dns.opcode
import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.update
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

SIG, KEY, ALGORITHM = 24, 25, 13


def key_rdata(private_key):
    numbers = private_key.public_key().public_numbers()
    return struct.pack("!HBB", 0, 3, ALGORITHM) + numbers.x.to_bytes(32, "big") + numbers.y.to_bytes(32, "big")


def key_tag(rdata):
    total = sum(byte << 8 if index % 2 == 0 else byte for index, byte in enumerate(rdata))
    total += (total >> 16) & 0xFFFF
    return total & 0xFFFF


def build(args, private_key):
    zone = dns.name.from_text(args.zone)
    host = dns.name.from_text(args.host, zone)
    update = dns.update.UpdateMessage(zone)
    key = dns.rdata.GenericRdata(dns.rdataclass.IN, KEY, key_rdata(private_key))
    ttl = args.ttl
    for service, instance_label in zip(args.service, args.instance):
        service_name = dns.name.from_text(service, zone)
        instance = dns.name.Name((instance_label.encode(),) + service_name.labels)
        for name in [service_name] + [dns.name.Name((sub.encode(), b"_sub") + service_name.labels)
                                      for sub in args.subtype]:
            if args.remove:  # "Delete an RR from an RRset" (RFC 2136 §2.5.4)
                update.delete(name, dns.rdatatype.PTR, instance.to_text())
            else:
                update.add(name, ttl, dns.rdatatype.PTR, instance.to_text())
        update.delete(instance)
        if not args.remove:
            update.add(instance, ttl, dns.rdatatype.SRV, "0 0 %d %s" % (args.port, host.to_text()))
            update.add(instance, ttl, dns.rdatatype.TXT, " ".join('"%s"' % t for t in args.txt) or '""')
        update.add(instance, ttl, key)
    update.delete(host)
    for address in args.address:
        update.add(host, ttl, dns.rdatatype.AAAA if ":" in address else dns.rdatatype.A, address)
    update.add(host, ttl, key)
    options = []
    if args.lease is not None:
        data = struct.pack("!I", args.lease) + (struct.pack("!I", args.key_lease) if args.key_lease is not None else b"")
        options.append(dns.edns.GenericOption(2, data))
    update.use_edns(0, payload=1232, options=options)
    update.id = args.id if args.id is not None else int.from_bytes(os.urandom(2), "big")
    return update, host


def sign(wire, private_key, signer, now=None):
    """Appends the SIG(0) to `wire` (an unsigned message) and returns the signed message."""
    now = int(time.time()) if now is None else now
    rdata_head = struct.pack("!HBBIIIH", 0, ALGORITHM, 0, 0, (now + 300) & 0xFFFFFFFF, (now - 300) & 0xFFFFFFFF,
                             key_tag(key_rdata(private_key))) + signer.to_wire()
    der = private_key.sign(rdata_head + wire, ec.ECDSA(hashes.SHA256()))
    r, s = decode_dss_signature(der)
    rdata = rdata_head + r.to_bytes(32, "big") + s.to_bytes(32, "big")
    record = b"\x00" + struct.pack("!HHIH", SIG, 255, 0, len(rdata)) + rdata
    arcount = struct.unpack("!H", wire[10:12])[0] + 1
    return wire[:10] + struct.pack("!H", arcount) + wire[12:] + record


def verify(signed, public_rdata):
    """Checks a SIG(0)-signed message as a registrar would: True, False."""
    try:
        return _verify(signed, public_rdata)
    except (IndexError, ValueError, struct.error):
        return False


def _verify(signed, public_rdata):
    # Walk to the last record: header, then names and fixed fields.
    def skip_name(offset):
        while True:
            length = signed[offset]
            if length == 0:
                return offset + 1
            if length & 0xC0 == 0xC0:
                return offset + 2
            offset += 1 + length
    qd, an, ns, ar = struct.unpack("!HHHH", signed[4:12])
    offset = 12
    for _ in range(qd):
        offset = skip_name(offset) + 4
    last = offset
    for _ in range(an + ns + ar):
        last = offset
        offset = skip_name(offset)
        length = struct.unpack("!H", signed[offset + 8:offset + 10])[0]
        offset += 10 + length
    rdata = signed[last + 11:]
    name_end = 18
    while rdata[name_end] != 0:
        name_end += 1 + rdata[name_end]
    name_end += 1
    head, signature = rdata[:name_end], rdata[name_end:]
    prefix = bytearray(signed[:last])
    prefix[10:12] = struct.pack("!H", ar - 1)
    x, y = public_rdata[4:36], public_rdata[36:68]
    public = ec.EllipticCurvePublicNumbers(int.from_bytes(x, "big"), int.from_bytes(y, "big"), ec.SECP256R1())
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    try:
        public.public_key().verify(der, head + bytes(prefix), ec.ECDSA(hashes.SHA256()))
        return True
    except Exception:
        return False


def load_key(path):
    if path and os.path.exists(path):
        with open(path, "rb") as handle:
            return serialization.load_pem_private_key(handle.read(), None)
    key = ec.generate_private_key(ec.SECP256R1())
    if path:
        with open(path, "wb") as handle:
            handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return key


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--zone", default="default.service.arpa.")
    parser.add_argument("--host", required=True)
    parser.add_argument("--address", action="append", default=[])
    parser.add_argument("--service", action="append", default=[])
    parser.add_argument("--instance", action="append", default=[])
    parser.add_argument("--subtype", action="append", default=[])
    parser.add_argument("--port", type=int, default=631)
    parser.add_argument("--txt", action="append", default=[])
    parser.add_argument("--ttl", type=int, default=120)
    parser.add_argument("--lease", type=int, default=7200, help="LEASE; -1: no Update Lease option")
    parser.add_argument("--key-lease", type=int, default=1209600, help="KEY-LEASE; -1: a 4-octet option")
    parser.add_argument("--remove", action="store_true", help="delete the services (no SRV, no TXT)")
    parser.add_argument("--key-file")
    parser.add_argument("--id", type=int)
    parser.add_argument("--hex", action="store_true", help="print the signed update's octets, send nothing")
    parser.add_argument("--server")
    parser.add_argument("--server-port", type=int, default=53)
    parser.add_argument("--tcp", action="store_true")
    parser.add_argument("--tls", action="store_true", help="DNS over TLS (RFC 7858), certificate not checked (labs)")
    args = parser.parse_args()
    if args.lease == -1:
        args.lease = None
    if args.key_lease == -1:
        args.key_lease = None
    private_key = load_key(args.key_file)
    update, host = build(args, private_key)
    signed = sign(update.to_wire(), private_key, host)
    if args.hex:
        print(signed.hex())
        return 0
    family = socket.AF_INET6 if ":" in args.server else socket.AF_INET
    if args.tcp or args.tls:
        with socket.create_connection((args.server, args.server_port), timeout=5) as plain:
            conn = plain
            if args.tls:
                import ssl
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
                conn = context.wrap_socket(plain)
            conn.sendall(struct.pack("!H", len(signed)) + signed)
            length = struct.unpack("!H", conn.recv(2))[0]
            reply = b""
            while len(reply) < length:
                reply += conn.recv(length - len(reply))
    else:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.settimeout(5)
            sock.sendto(signed, (args.server, args.server_port))
            reply, _ = sock.recvfrom(65535)
    response = dns.message.from_wire(reply)
    lease = [o for o in (response.options or []) if o.otype == 2]
    print(dns.rcode.to_text(response.rcode()), lease[0].to_wire().hex() if lease else "-")
    return 0


if __name__ == "__main__":
    sys.exit(main())
