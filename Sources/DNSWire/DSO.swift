/// DNS Stateful Operations messages (RFC 8490 §5.4): a DNS header with OPCODE 6 and all four
/// counts zero, followed by TLVs. The first TLV of a request or unidirectional message is the
/// Primary TLV; the rest are Additional TLVs. ldns knows nothing of DSO, so the framing is
/// coded here by hand; records inside the RFC 8765 TLVs use the ldns-backed `RData`.
public struct DSOMessage: Hashable, Sendable {
    public var id: UInt16
    public var isResponse: Bool
    /// Only the header's 4-bit RCODE exists in DSO (no OPT record): 0...15.
    public var rcode: RCode
    public var tlvs: [DSOTLV]

    public init(id: UInt16, isResponse: Bool = false, rcode: RCode = .noError, tlvs: [DSOTLV] = []) {
        self.id = id
        self.isResponse = isResponse
        self.rcode = rcode
        self.tlvs = tlvs
    }

    /// RFC 8490 §5.4: QR 0 and ID 0 is a unidirectional message, never answered.
    public var isUnidirectional: Bool { !isResponse && id == 0 }
    public var primary: DSOTLV? { tlvs.first }
    public var additional: ArraySlice<DSOTLV> { tlvs.dropFirst() }

    /// The largest DSO message a DNS Push server sends (RFC 8765 §6.3: 16,384 octets with the
    /// 2-octet length prefix).
    public static let maxPushMessageSize = 16_382

    /// Decodes a message whose header says OPCODE 6.
    public init(wire: [UInt8]) throws(DSOError) {
        guard let header = MessageHeader(wire) else { throw .noHeader }
        guard header.opcode == .dso else { throw .notDSO }
        self.id = header.id
        self.isResponse = header.isResponse
        self.rcode = RCode(header.flags & 0x000F)
        // §5.4: "If a DSO message is received where any of the count fields are not zero,
        // then a FORMERR MUST be returned".
        guard header.qdCount == 0, header.anCount == 0, header.nsCount == 0, header.arCount == 0 else {
            throw .malformed("DSO message with non-zero record counts")
        }
        var tlvs: [DSOTLV] = []
        var index = 12
        while index < wire.count {
            guard index + 4 <= wire.count else { throw .malformed("truncated TLV header at octet \(index)") }
            let type = UInt16(wire[index]) << 8 | UInt16(wire[index + 1])
            let length = Int(wire[index + 2]) << 8 | Int(wire[index + 3])
            index += 4
            guard index + length <= wire.count else {
                throw .malformed("TLV \(type) of \(length) octets overruns the message")
            }
            tlvs.append(DSOTLV(type: type, data: Array(wire[index..<(index + length)])))
            index += length
        }
        self.tlvs = tlvs
    }

    public func encode() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(12 + tlvs.reduce(0) { $0 + 4 + $1.data.count })
        out.appendU16(id)
        let flags: UInt16 = (isResponse ? 0x8000 : 0) | UInt16(Opcode.dso.rawValue) << 11 | (rcode.rawValue & 0x000F)
        out.appendU16(flags)
        out.append(contentsOf: [UInt8](repeating: 0, count: 8))
        for tlv in tlvs {
            out.appendU16(tlv.type)
            out.appendU16(UInt16(clamping: tlv.data.count))
            out.append(contentsOf: tlv.data)
        }
        return out
    }
}

/// One DSO TLV: a 16-bit type, then its data (the length is implied by `data`).
public struct DSOTLV: Hashable, Sendable {
    public var type: UInt16
    public var data: [UInt8]

    public init(type: UInt16, data: [UInt8] = []) {
        self.type = type
        self.data = data
    }

    // RFC 8490 §10.3 and RFC 8765 §6.
    public static let keepaliveType: UInt16 = 0x0001
    public static let retryDelayType: UInt16 = 0x0002
    public static let paddingType: UInt16 = 0x0003
    public static let subscribeType: UInt16 = 0x0040
    public static let pushType: UInt16 = 0x0041
    public static let unsubscribeType: UInt16 = 0x0042
    public static let reconfirmType: UInt16 = 0x0043

    /// Keepalive (§7.1): inactivity timeout, then keepalive interval, both in milliseconds.
    public static func keepalive(inactivityMilliseconds: UInt32, keepaliveMilliseconds: UInt32) -> DSOTLV {
        var data: [UInt8] = []
        data.appendU32(inactivityMilliseconds)
        data.appendU32(keepaliveMilliseconds)
        return DSOTLV(type: keepaliveType, data: data)
    }

    /// Retry Delay (§7.2): milliseconds.
    public static func retryDelay(milliseconds: UInt32) -> DSOTLV {
        var data: [UInt8] = []
        data.appendU32(milliseconds)
        return DSOTLV(type: retryDelayType, data: data)
    }

    public static func padding(_ count: Int) -> DSOTLV {
        DSOTLV(type: paddingType, data: [UInt8](repeating: 0, count: max(0, count)))
    }

    /// The two values of a Keepalive TLV, nil when its length is not 8.
    public var keepaliveValues: (inactivity: UInt32, keepalive: UInt32)? {
        guard type == Self.keepaliveType, data.count == 8 else { return nil }
        return (data.u32(at: 0), data.u32(at: 4))
    }
}

public enum DSOError: Error, Equatable, Sendable, CustomStringConvertible {
    case noHeader
    case notDSO
    case malformed(String)

    public var description: String {
        switch self {
        case .noHeader: return "message shorter than a DNS header"
        case .notDSO: return "not a DSO message"
        case .malformed(let why): return "malformed DSO message: \(why)"
        }
    }
}

/// RCODE 11, DSOTYPENI: unknown Primary TLV in a DSO request (RFC 8490 §10.2).
extension RCode {
    public static let dsoTypeNI = RCode(11)
}

extension Array where Element == UInt8 {
    mutating func appendU16(_ value: UInt16) {
        append(UInt8(value >> 8))
        append(UInt8(value & 0xFF))
    }

    mutating func appendU32(_ value: UInt32) {
        appendU16(UInt16(value >> 16))
        appendU16(UInt16(value & 0xFFFF))
    }

    func u16(at index: Int) -> UInt16 { UInt16(self[index]) << 8 | UInt16(self[index + 1]) }
    func u32(at index: Int) -> UInt32 { UInt32(u16(at: index)) << 16 | UInt32(u16(at: index + 2)) }
}
