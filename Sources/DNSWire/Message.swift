/// A DNS message. Decoding and encoding go through libldns (see `Message+LDNS.swift`).
public struct Message: Sendable, Hashable {
    public var id: UInt16
    public var isResponse: Bool
    public var opcode: Opcode
    public var authoritative: Bool
    public var truncated: Bool
    public var recursionDesired: Bool
    public var recursionAvailable: Bool
    public var authenticData: Bool
    public var checkingDisabled: Bool
    /// The full (possibly extended, 12-bit) response code; the encoder splits it between
    /// the header and the OPT record (RFC 6891 §6.1.3).
    public var rcode: RCode
    public var questions: [Question]
    public var answers: [ResourceRecord]
    public var authority: [ResourceRecord]
    /// Additional records other than OPT.
    public var additional: [ResourceRecord]
    /// The OPT record, if any; nil means the message has none.
    public var edns: EDNS?

    public init(
        id: UInt16 = 0, isResponse: Bool = false, opcode: Opcode = .query, authoritative: Bool = false,
        truncated: Bool = false, recursionDesired: Bool = false, recursionAvailable: Bool = false,
        authenticData: Bool = false, checkingDisabled: Bool = false, rcode: RCode = .noError,
        questions: [Question] = [], answers: [ResourceRecord] = [], authority: [ResourceRecord] = [],
        additional: [ResourceRecord] = [], edns: EDNS? = nil
    ) {
        self.id = id
        self.isResponse = isResponse
        self.opcode = opcode
        self.authoritative = authoritative
        self.truncated = truncated
        self.recursionDesired = recursionDesired
        self.recursionAvailable = recursionAvailable
        self.authenticData = authenticData
        self.checkingDisabled = checkingDisabled
        self.rcode = rcode
        self.questions = questions
        self.answers = answers
        self.authority = authority
        self.additional = additional
        self.edns = edns
    }
}

/// The fixed 12-byte header, readable even when the rest of a message is not: a malformed
/// query with a readable header gets FORMERR, one without is dropped.
public struct MessageHeader: Sendable, Hashable {
    public var id: UInt16
    public var flags: UInt16
    public var qdCount: UInt16
    public var anCount: UInt16
    public var nsCount: UInt16
    public var arCount: UInt16

    public var isResponse: Bool { flags & 0x8000 != 0 }
    public var opcode: Opcode { Opcode(rawValue: UInt8((flags >> 11) & 0xF)) }
    public var recursionDesired: Bool { flags & 0x0100 != 0 }

    public init?(_ bytes: some Collection<UInt8>) {
        guard bytes.count >= 12 else { return nil }
        var it = bytes.makeIterator()
        func u16(_ it: inout some IteratorProtocol<UInt8>) -> UInt16 {
            UInt16(it.next()!) << 8 | UInt16(it.next()!)
        }
        id = u16(&it)
        flags = u16(&it)
        qdCount = u16(&it)
        anCount = u16(&it)
        nsCount = u16(&it)
        arCount = u16(&it)
    }
}

/// Why a message could not be decoded or encoded.
public enum DNSWireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Shorter than a header: drop silently.
    case noHeader
    /// A readable header but a malformed body (bad names, counts that lie, pointer loops,
    /// two OPT records, ...): answer FORMERR.
    case malformed(String)
    /// The encoder could not produce the message.
    case encoding(String)

    public var description: String {
        switch self {
        case .noHeader: return "message shorter than a DNS header"
        case .malformed(let why): return "malformed message: \(why)"
        case .encoding(let why): return "cannot encode message: \(why)"
        }
    }
}
