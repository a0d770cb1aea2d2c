/// The DNS Push Notification TLVs (RFC 8765 §6.2–6.5). Names are uncompressed (§6.2: "no
/// DNS name compression"); RDATA is raw octets, decoded with `RData(type:wire:)` when needed.

/// SUBSCRIBE (§6.2): one name, type and class.
public struct PushSubscribe: Hashable, Sendable {
    public var name: DNSName
    public var type: RRType
    public var rrClass: RRClass

    public init(name: DNSName, type: RRType, rrClass: RRClass = .in) {
        self.name = name
        self.type = type
        self.rrClass = rrClass
    }

    public init(tlv: DSOTLV) throws(DSOError) {
        var reader = TLVReader(tlv.data)
        (name, type, rrClass) = try reader.owner()
        guard reader.atEnd else { throw .malformed("SUBSCRIBE has \(reader.remaining) trailing octets") }
    }

    public var tlv: DSOTLV {
        var data = [UInt8]()
        data.appendOwner(name, type, rrClass)
        return DSOTLV(type: DSOTLV.subscribeType, data: data)
    }
}

/// RECONFIRM (§6.5): one record without TTL and RDLENGTH; the RDATA runs to the TLV's end.
public struct PushReconfirm: Hashable, Sendable {
    public var name: DNSName
    public var type: RRType
    public var rrClass: RRClass
    public var rdata: [UInt8]

    public init(name: DNSName, type: RRType, rrClass: RRClass = .in, rdata: [UInt8]) {
        self.name = name
        self.type = type
        self.rrClass = rrClass
        self.rdata = rdata
    }

    public init(tlv: DSOTLV) throws(DSOError) {
        var reader = TLVReader(tlv.data)
        (name, type, rrClass) = try reader.owner()
        rdata = reader.rest()
    }

    public var tlv: DSOTLV {
        var data = [UInt8]()
        data.appendOwner(name, type, rrClass)
        data.append(contentsOf: rdata)
        return DSOTLV(type: DSOTLV.reconfirmType, data: data)
    }
}

/// UNSUBSCRIBE (§6.4): the message ID of the SUBSCRIBE being cancelled.
public struct PushUnsubscribe: Hashable, Sendable {
    public var subscriptionID: UInt16

    public init(subscriptionID: UInt16) { self.subscriptionID = subscriptionID }

    public init(tlv: DSOTLV) throws(DSOError) {
        guard tlv.data.count == 2 else { throw .malformed("UNSUBSCRIBE of \(tlv.data.count) octets, not 2") }
        subscriptionID = tlv.data.u16(at: 0)
    }

    public var tlv: DSOTLV {
        var data: [UInt8] = []
        data.appendU16(subscriptionID)
        return DSOTLV(type: DSOTLV.unsubscribeType, data: data)
    }
}

/// One change record of a PUSH (§6.3.1). The TTL tells the kind of change.
public struct PushChange: Hashable, Sendable {
    public var name: DNSName
    public var type: RRType
    public var rrClass: RRClass
    public var ttl: UInt32
    public var rdata: [UInt8]

    /// TTL of a single-record removal.
    public static let removeRecordTTL: UInt32 = 0xFFFF_FFFF
    /// TTL of an RRset removal (RDLENGTH 0): TYPE 255 means every type, CLASS 255 every class.
    public static let removeSetTTL: UInt32 = 0xFFFF_FFFE

    public init(name: DNSName, type: RRType, rrClass: RRClass = .in, ttl: UInt32, rdata: [UInt8]) {
        self.name = name
        self.type = type
        self.rrClass = rrClass
        self.ttl = ttl
        self.rdata = rdata
    }

    public static func add(_ name: DNSName, _ type: RRType, ttl: UInt32, rdata: [UInt8]) -> PushChange {
        PushChange(name: name, type: type, ttl: min(ttl, 0x7FFF_FFFF), rdata: rdata)
    }

    public static func remove(_ name: DNSName, _ type: RRType, rdata: [UInt8]) -> PushChange {
        PushChange(name: name, type: type, ttl: removeRecordTTL, rdata: rdata)
    }

    public static func removeSet(_ name: DNSName, _ type: RRType, rrClass: RRClass = .in) -> PushChange {
        PushChange(name: name, type: type, rrClass: rrClass, ttl: removeSetTTL, rdata: [])
    }

    public var isAddition: Bool { ttl <= 0x7FFF_FFFF }

    /// Octets this change takes inside a PUSH TLV.
    public var wireLength: Int { name.wireLength + 10 + rdata.count }

    func append(to data: inout [UInt8]) {
        data.appendOwner(name, type, rrClass)
        data.appendU32(ttl)
        data.appendU16(UInt16(clamping: rdata.count))
        data.append(contentsOf: rdata)
    }
}

/// PUSH (§6.3): one or more change records.
public struct PushNotification: Hashable, Sendable {
    public var changes: [PushChange]

    public init(changes: [PushChange]) { self.changes = changes }

    public init(tlv: DSOTLV) throws(DSOError) {
        var reader = TLVReader(tlv.data)
        var changes: [PushChange] = []
        while !reader.atEnd {
            let (name, type, rrClass) = try reader.owner()
            let ttl = try reader.u32()
            let length = Int(try reader.u16())
            let rdata = try reader.bytes(length)
            changes.append(PushChange(name: name, type: type, rrClass: rrClass, ttl: ttl, rdata: rdata))
        }
        guard !changes.isEmpty else { throw .malformed("PUSH without change records") }
        self.changes = changes
    }

    public var tlv: DSOTLV {
        var data: [UInt8] = []
        for change in changes { change.append(to: &data) }
        return DSOTLV(type: DSOTLV.pushType, data: data)
    }

    /// Unidirectional PUSH messages holding `changes` in order, each at most
    /// `DSOMessage.maxPushMessageSize` octets (§6.3: split what does not fit). A change too
    /// large for any message (impossible for names ≤ 255 and RDATA from mDNS packets) is dropped.
    public static func messages(for changes: [PushChange], limit: Int = DSOMessage.maxPushMessageSize) -> [DSOMessage] {
        let overhead = 12 + 4
        var messages: [DSOMessage] = []
        var batch: [PushChange] = []
        var size = overhead
        for change in changes where overhead + change.wireLength <= limit {
            if size + change.wireLength > limit {
                messages.append(DSOMessage(id: 0, tlvs: [PushNotification(changes: batch).tlv]))
                batch = []
                size = overhead
            }
            batch.append(change)
            size += change.wireLength
        }
        if !batch.isEmpty { messages.append(DSOMessage(id: 0, tlvs: [PushNotification(changes: batch).tlv])) }
        return messages
    }
}

/// Reads the fields of a TLV's data.
struct TLVReader {
    private let data: [UInt8]
    private var index = 0

    init(_ data: [UInt8]) { self.data = data }

    var atEnd: Bool { index == data.count }
    var remaining: Int { data.count - index }

    mutating func u16() throws(DSOError) -> UInt16 {
        guard remaining >= 2 else { throw .malformed("TLV ends inside a 16-bit field") }
        defer { index += 2 }
        return data.u16(at: index)
    }

    mutating func u32() throws(DSOError) -> UInt32 {
        guard remaining >= 4 else { throw .malformed("TLV ends inside a 32-bit field") }
        defer { index += 4 }
        return data.u32(at: index)
    }

    mutating func bytes(_ count: Int) throws(DSOError) -> [UInt8] {
        guard remaining >= count else { throw .malformed("RDATA of \(count) octets overruns the TLV") }
        defer { index += count }
        return Array(data[index..<(index + count)])
    }

    /// The name, type and class that start SUBSCRIBE, RECONFIRM and each PUSH change record.
    mutating func owner() throws(DSOError) -> (DNSName, RRType, RRClass) {
        let name = try name()
        return (name, RRType(try u16()), RRClass(try u16()))
    }

    mutating func rest() -> [UInt8] {
        defer { index = data.count }
        return Array(data[index...])
    }

    /// An uncompressed name: compression pointers are not allowed in DSO TLVs.
    mutating func name() throws(DSOError) -> DNSName {
        var labels: [[UInt8]] = []
        while true {
            guard remaining >= 1 else { throw .malformed("name runs past the TLV") }
            let length = Int(data[index])
            index += 1
            if length == 0 { break }
            guard length <= 63 else { throw .malformed("label length octet \(length) (compression is not allowed)") }
            labels.append(try bytes(length))
        }
        do {
            return try DNSName(labels: labels)
        } catch {
            throw .malformed("name: \(error)")
        }
    }
}

extension Array where Element == UInt8 {
    /// Writes what `TLVReader.owner()` reads: an uncompressed name (RFC 8765 §6.2), type, class.
    mutating func appendOwner(_ name: DNSName, _ type: RRType, _ rrClass: RRClass) {
        append(contentsOf: name.wireBytes)
        appendU16(type.rawValue)
        appendU16(rrClass.rawValue)
    }
}
