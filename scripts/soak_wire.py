"""The soak's check of every record of a response, done on the wire.

helpers.assert_sane on a parsed dnspython message costs the generator about 3 ms a query
(a browse answer carries an SRV, TXT and addresses per instance in its additional section),
which held scripts/soak.py near 370 q/s on one core. `scan` checks the same invariants without
building objects and returns where the answer section ends, so only the header, question and
answer are parsed for the checks against the truth (`answer_message`)."""

from __future__ import annotations

import struct

import dns.message

MAX_TTL = 10          # RFC 8766 §5.5.1
CLASS_IN = 1
TYPE_OPT = 41
# Types whose RDATA holds names, with the offset of the first name and how many follow.
NAMES_IN_RDATA = {2: (0, 1), 5: (0, 1), 6: (0, 2), 12: (0, 1), 15: (2, 1), 33: (6, 1), 39: (0, 1), 47: (0, 1)}


class Insane(AssertionError):
    pass


def read_name(wire, offset):
    """(labels lowercased, offset after the name); compression pointers followed backwards only."""
    labels, end, seen = [], None, 0
    while True:
        length = wire[offset]
        if length >= 0xC0:
            target = ((length & 0x3F) << 8) | wire[offset + 1]
            if end is None:
                end = offset + 2
            if target >= offset or seen > 127:
                raise Insane("bad compression pointer at %d" % offset)
            offset, seen = target, seen + 1
            continue
        if length == 0:
            return labels, (end if end is not None else offset + 1)
        labels.append(wire[offset + 1:offset + 1 + length].lower())
        offset += 1 + length


def is_local(labels):
    return bool(labels) and labels[-1] == b"local"


def scan(wire):
    """Raises Insane unless every question and record keeps the invariants of
    helpers.assert_sane: class IN, TTL <= 10, no .local name as owner or in RDATA, at most one
    OPT. Returns the offset where the answer section ends."""
    if len(wire) < 12:
        raise Insane("short message (%d bytes)" % len(wire))
    qd, an, ns, ar = struct.unpack_from("!4H", wire, 4)
    offset = 12
    for _ in range(qd):
        labels, offset = read_name(wire, offset)
        if is_local(labels):
            raise Insane("question name rewritten to .local: %r" % labels)
        offset += 4
    answer_end, opts = None, 0
    for index in range(an + ns + ar):
        if index == an:
            answer_end = offset
        owner, offset = read_name(wire, offset)
        rtype, rclass, ttl, rdlength = struct.unpack_from("!HHIH", wire, offset)
        offset += 10
        if rtype == TYPE_OPT:
            opts += 1
            if opts > 1:
                raise Insane("more than one OPT")
        else:
            if rclass != CLASS_IN:
                raise Insane("class %d in a type %d record of %r" % (rclass, rtype, owner))
            if ttl > MAX_TTL:
                raise Insane("TTL %d > %d in a type %d record of %r" % (ttl, MAX_TTL, rtype, owner))
            if is_local(owner):
                raise Insane(".local owner %r" % owner)
            if rtype in NAMES_IN_RDATA:
                at, count = NAMES_IN_RDATA[rtype]
                at += offset
                for _ in range(count):
                    labels, at = read_name(wire, at)
                    if is_local(labels):
                        raise Insane(".local name in the RDATA of a type %d record of %r" % (rtype, owner))
        offset += rdlength
    if offset > len(wire):
        raise Insane("records run past the end of the message")
    return answer_end if answer_end is not None else offset


def answer_message(wire, answer_end):
    """The header, question and answer of `wire` as a dnspython message (authority and
    additional left out: `scan` has checked them)."""
    head = bytearray(wire[:answer_end])
    struct.pack_into("!2H", head, 8, 0, 0)
    return dns.message.from_wire(bytes(head))
