import DNSWire

/// How fast a publisher may send its own unsolicited responses on one interface: packets per
/// second and the burst it may send at once (`mdns-announce-rate`, `mdns-announce-burst`).
public struct AnnouncementPacing: Sendable, Equatable {
    public var packetsPerSecond: Double
    public var burst: Double

    public init(packetsPerSecond: Double = 20, burst: Double = 40) {
        self.packetsPerSecond = packetsPerSecond
        self.burst = burst
    }
}

/// The unsolicited mDNS responses a publisher sends itself, per interface: announcements
/// (RFC 6762 §8.3: two, one second apart; §8.4: a changed record is announced the same way)
/// and goodbyes (§10.1: TTL zero). Records due together share packets; each packet takes a
/// token from the interface's bucket, so a burst of changes is spread out, never dropped.
///
/// A value with no clock and no sockets: the owner passes `now` and sends what `due` returns.
public struct AnnouncementQueue: Sendable {
    /// One record as it goes on the wire. `ttl` zero is a goodbye.
    public struct Outgoing: Hashable, Sendable {
        public var record: MDNSRecord
        /// Sets the cache-flush bit (RFC 6762 §10.2): the record is unique, the sender owns its name.
        public var unique: Bool
        public var ttl: UInt32

        public init(record: MDNSRecord, unique: Bool, ttl: UInt32) {
            self.record = record
            self.unique = unique
            self.ttl = ttl
        }
    }

    /// RFC 6762 §8.3: the second announcement one second after the first.
    public static let repeatAfter: Duration = .seconds(1)
    /// The DNS payload a packet is filled to: an Ethernet MTU less IPv6 and UDP headers, with room
    /// to spare; a record bigger than that goes alone (§17 allows up to 9000 bytes).
    public static let packetSize = 1400

    /// At most this many records fit a packet: each takes at least 12 bytes (a compressed
    /// owner, type, class, TTL and length).
    static let recordsPerPacket = packetSize / 12

    /// A change resets the buckets, so that a reload's budget applies at once.
    public var pacing: AnnouncementPacing {
        didSet { if pacing != oldValue { buckets = [:] } }
    }
    private var pending: [String: PendingAnnouncements] = [:]
    private var buckets: [String: TokenBucket] = [:]
    /// When `due` next has something to send on each interface with records pending.
    private var wakes: [String: Duration] = [:]

    public init(pacing: AnnouncementPacing = AnnouncementPacing()) {
        self.pacing = pacing
    }

    public var isEmpty: Bool { pending.isEmpty }

    /// Announces `records` on `interface` now and again one second after it is sent. A pending goodbye
    /// for one of them is cancelled, and so is a pending announcement of other data for a
    /// unique record's name and type (it was replaced).
    public mutating func announce(_ records: [Outgoing], on interface: String, now: Duration) {
        guard !records.isEmpty else { return }
        // Moved out, not copied: a copy would share its storage and copy it all at the first change.
        var queue = pending.removeValue(forKey: interface) ?? PendingAnnouncements()
        for new in records where new.unique {
            for old in queue.announcing(like: new.record) where old != new.record { queue.cancel(old) }
        }
        for new in records { queue.add(new, due: now, repeats: true) }
        pending[interface] = queue
        wakes[interface] = min(wakes[interface] ?? now, now)
    }

    /// Says goodbye to `records` on `interface` (TTL zero, once); their pending announcements are cancelled.
    public mutating func goodbye(_ records: [Outgoing], on interface: String, now: Duration) {
        guard !records.isEmpty else { return }
        var queue = pending.removeValue(forKey: interface) ?? PendingAnnouncements()
        for old in records {
            queue.add(Outgoing(record: old.record, unique: old.unique, ttl: 0), due: now, repeats: false)
        }
        pending[interface] = queue
        wakes[interface] = min(wakes[interface] ?? now, now)
    }

    /// The interfaces with something queued, in order.
    public var interfaces: [String] { pending.keys.sorted() }

    /// The packets to send now on `interface`, as far as its budget allows; only the records
    /// those packets hold are encoded. `ignoringPacing` empties the queue at once (shutdown
    /// goodbyes). The budget holds on the wire when the caller sends them
    /// as soon as they are made, with `now` read then: encoding fifty client links' packets
    /// before sending any put half a second between the budget's clock and the wire.
    public mutating func due(on interface: String, now: Duration, ignoringPacing: Bool = false) -> [[UInt8]] {
        guard ignoringPacing || (wakes[interface].map { $0 <= now } ?? true),
            var queue = pending.removeValue(forKey: interface)
        else { return [] }
        var out: [[UInt8]] = []
        var bucket = buckets[interface] ?? TokenBucket(rate: pacing.packetsPerSecond, burst: pacing.burst, now: now)
        let tokens = ignoringPacing ? Int.max : bucket.available(now: now)
        if tokens > 0 {
            let limit =
                ignoringPacing ? Int.max : tokens.multipliedReportingOverflow(by: Self.recordsPerPacket).partialValue
            let entries = queue.due(by: now, limit: limit).entries
            var taken = entries.makeIterator()
            for packet in MDNSResponseEncoder.packets(entries.map(\.outgoing), limit: Self.packetSize).prefix(tokens) {
                if !ignoringPacing { _ = bucket.reserve(now: now) }
                out.append(packet.bytes)
                for _ in packet.records {
                    guard let entry = taken.next() else { break }
                    if entry.repeats && !ignoringPacing {
                        queue.addSecond(entry.outgoing, due: now + Self.repeatAfter)
                    } else {
                        queue.cancel(entry.outgoing.record)
                    }
                }
            }
        }
        buckets[interface] = bucket
        // What is due and left waits for the next token, ahead of later rounds.
        if let next = queue.due(by: now, limit: 0).next {
            pending[interface] = queue
            wakes[interface] = next > now ? next : now + bucket.untilNext(now: now)
        } else {
            wakes[interface] = nil
        }
        return out
    }

    /// When `due` has something to send next.
    public var nextDue: Duration? { wakes.values.min() }
}

/// Unsolicited mDNS responses on the wire (RFC 6762 §18: ID zero, QR and AA set, answers
/// only), records packed in the order given, names compressed (`NameCompressor`).
enum MDNSResponseEncoder {
    struct Packet {
        var bytes: [UInt8]
        var records: [AnnouncementQueue.Outgoing]
    }

    static let headerSize = 12

    /// `additional` records (RFC 6763 §12) follow the answers in the last packet as far as
    /// they fit; what does not fit is left out (the querier asks for it if it needs it).
    static func packets(
        _ records: [AnnouncementQueue.Outgoing], additional: [AnnouncementQueue.Outgoing] = [], limit: Int
    ) -> [Packet] {
        var packets: [Packet] = []
        var current = Packet(bytes: [], records: [])
        var names = NameCompressor()
        for record in records {
            var encoded = encode(record, at: headerSize + current.bytes.count, names: &names)
            if !current.records.isEmpty && headerSize + current.bytes.count + encoded.count > limit {
                // It goes in the next packet, with names of its own (what the try noted
                // points past the end of this one, which nothing else will be added to).
                packets.append(current)
                current = Packet(bytes: [], records: [])
                names = NameCompressor()
                encoded = encode(record, at: headerSize, names: &names)
            }
            current.bytes += encoded
            current.records.append(record)
        }
        var extra = 0
        if !current.records.isEmpty {
            for record in additional {
                let encoded = encode(record, at: headerSize + current.bytes.count, names: &names)
                guard headerSize + current.bytes.count + encoded.count <= limit else { break }
                current.bytes += encoded
                extra += 1
            }
            packets.append(current)
        }
        return packets.enumerated().map { index, packet in
            let count = UInt16(packet.records.count)
            let more = UInt16(index == packets.count - 1 ? extra : 0)
            let header: [UInt8] = [
                0, 0, 0x84, 0x00, 0, 0, UInt8(count >> 8), UInt8(count & 0xff), 0, 0, UInt8(more >> 8),
                UInt8(more & 0xff),
            ]
            return Packet(bytes: header + packet.bytes, records: packet.records)
        }
    }

    /// RFC 6762 §6.7: the answer to a legacy resolver's query (from a port other than 5353):
    /// its ID, its questions repeated, TTLs of at most `ttl`, no cache-flush bits; what does
    /// not fit one packet is cut, with TC set.
    static func legacyReply(to query: Message, answers: [MDNSRecord], ttl: UInt32) -> [UInt8] {
        var names = NameCompressor()
        var body: [UInt8] = []
        for question in query.questions {
            body += names.compress(question.name.wireBytes, at: headerSize + body.count)
            for value in [question.type.rawValue, RRClass.in.rawValue] {
                body += [UInt8(value >> 8), UInt8(value & 0xff)]
            }
        }
        var count = 0
        var truncated = false
        for record in answers {
            let outgoing = AnnouncementQueue.Outgoing(
                record: record, unique: false, ttl: min(ttl, MDNSRecord.defaultTTL(for: record.type)))
            let encoded = encode(outgoing, at: headerSize + body.count, names: &names)
            guard headerSize + body.count + encoded.count <= AnnouncementQueue.packetSize else {
                truncated = true
                break
            }
            body += encoded
            count += 1
        }
        let questions = UInt16(query.questions.count)
        return [
            UInt8(query.id >> 8), UInt8(query.id & 0xff), truncated ? 0x86 : 0x84, 0x00,
            UInt8(questions >> 8), UInt8(questions & 0xff), UInt8(count >> 8), UInt8(count & 0xff), 0, 0, 0, 0,
        ] + body
    }

    /// One record, to be placed `offset` octets into its packet.
    static func encode(_ item: AnnouncementQueue.Outgoing, at offset: Int, names: inout NameCompressor)
        -> [UInt8]
    {
        let record = item.record
        let rrClass = record.rrClass.rawValue | (item.unique ? 0x8000 : 0)
        var bytes = names.compress(record.name.wireBytes, at: offset)
        bytes.reserveCapacity(bytes.count + 10 + record.rdata.count)
        for value in [record.type.rawValue, rrClass] { bytes += [UInt8(value >> 8), UInt8(value & 0xff)] }
        bytes += [
            UInt8(item.ttl >> 24), UInt8((item.ttl >> 16) & 0xff), UInt8((item.ttl >> 8) & 0xff),
            UInt8(item.ttl & 0xff),
        ]
        let rdataAt = offset + bytes.count + 2
        let rdata: [UInt8]
        switch record.type {
        // RFC 6762 §18.14: the names in PTR and SRV RDATA are compressed too (SRV: after
        // priority, weight and port); TXT, A and AAAA hold none.
        case .ptr where NameCompressor.isName(record.rdata[...]):
            rdata = names.compress(record.rdata, at: rdataAt)
        case .srv where record.rdata.count > 6 && NameCompressor.isName(record.rdata[6...]):
            rdata = Array(record.rdata[..<6]) + names.compress(Array(record.rdata[6...]), at: rdataAt + 6)
        default:
            rdata = record.rdata
        }
        let length = UInt16(clamping: rdata.count)
        bytes += [UInt8(length >> 8), UInt8(length & 0xff)]
        bytes += rdata
        return bytes
    }
}

/// RFC 1035 §4.1.4 name compression for one message: each name written is remembered by its
/// suffixes, and a later name that ends in one of them points there. Suffixes match octet
/// for octet (not case-insensitively), so every name reads back exactly as it was given.
/// An announcement of a thousand far instances took twice the packets without it: each
/// record repeated `_ipp._tcp.local.` and its host's name in full.
struct NameCompressor {
    private var offsets: [ArraySlice<UInt8>: Int] = [:]

    /// `name` (uncompressed wire form) as written at `offset` of the message: its labels up to
    /// the first suffix already written, then a pointer to it.
    mutating func compress(_ name: [UInt8], at offset: Int) -> [UInt8] {
        var out: [UInt8] = []
        var index = 0
        while index < name.count, name[index] != 0 {
            if let earlier = offsets[name[index...]] {
                return out + [0xC0 | UInt8(earlier >> 8), UInt8(earlier & 0xFF)]
            }
            // A pointer has 14 bits: a suffix past 16383 octets cannot be pointed to.
            if offset + out.count < 0x4000 { offsets[name[index...]] = offset + out.count }
            let length = Int(name[index])
            out += name[index...(index + length)]
            index += length + 1
        }
        return out + [0]
    }

    /// Whether `bytes` is exactly one uncompressed wire name (labels, then the root).
    static func isName(_ bytes: ArraySlice<UInt8>) -> Bool {
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let length = Int(bytes[index])
            if length == 0 { return index == bytes.endIndex - 1 }
            guard length < 64 else { return false }
            index += length + 1
        }
        return false
    }
}
