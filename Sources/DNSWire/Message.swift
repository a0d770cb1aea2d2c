// The message model: the message, its records and their types, and the client that sent it.

/// A DNS message. Decoding and encoding go through libldns (see `LDNS/Message+LDNS.swift`).
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

// MARK: - Records

/// The RDATA of a record, decoded where the proxy must look inside (names to rewrite,
/// addresses to filter) and kept as raw bytes everywhere else.
public enum RData: Hashable, Sendable {
    case a([UInt8])  // 4 bytes
    case aaaa([UInt8])  // 16 bytes
    case ptr(DNSName)
    case cname(DNSName)
    case ns(DNSName)
    case dname(DNSName)
    case mx(preference: UInt16, exchange: DNSName)
    case srv(priority: UInt16, weight: UInt16, port: UInt16, target: DNSName)
    /// The TXT RDATA exactly as received: length-prefixed strings, byte for byte (RFC 6763 §6).
    case txt([UInt8])
    /// Boxed: the only large payload (two names and five counters); inline it would make every
    /// RData, and so every cached record, 16 bytes larger.
    indirect case soa(SOA)
    /// RFC 4034 §4: the next name and the types present at the owner.
    case nsec(next: DNSName, types: [RRType])
    /// Any other type: RDATA bytes passed through unchanged.
    case raw([UInt8])

    public struct SOA: Hashable, Sendable {
        public var mname: DNSName
        public var rname: DNSName
        public var serial: UInt32
        public var refresh: UInt32
        public var retry: UInt32
        public var expire: UInt32
        public var minimum: UInt32

        public init(
            mname: DNSName, rname: DNSName, serial: UInt32, refresh: UInt32, retry: UInt32, expire: UInt32,
            minimum: UInt32
        ) {
            self.mname = mname
            self.rname = rname
            self.serial = serial
            self.refresh = refresh
            self.retry = retry
            self.expire = expire
            self.minimum = minimum
        }
    }

    /// Names inside the RDATA, for rewriting `.local` names into a zone (RFC 8766 §5.5).
    public func mapNames(_ transform: (DNSName) -> DNSName) -> RData {
        switch self {
        case .ptr(let name): return .ptr(transform(name))
        case .cname(let name): return .cname(transform(name))
        case .ns(let name): return .ns(transform(name))
        case .dname(let name): return .dname(transform(name))
        case .mx(let preference, let exchange): return .mx(preference: preference, exchange: transform(exchange))
        case .srv(let priority, let weight, let port, let target):
            return .srv(priority: priority, weight: weight, port: port, target: transform(target))
        case .nsec(let next, let types): return .nsec(next: transform(next), types: types)
        case .soa(var soa):
            soa.mname = transform(soa.mname)
            soa.rname = transform(soa.rname)
            return .soa(soa)
        case .a, .aaaa, .txt, .raw: return self
        }
    }
}

/// One resource record. `rrClass` never carries the mDNS cache-flush bit.
public struct ResourceRecord: Hashable, Sendable {
    public var name: DNSName
    public var type: RRType
    public var rrClass: RRClass
    public var ttl: UInt32
    public var rdata: RData

    public init(name: DNSName, type: RRType, rrClass: RRClass = .in, ttl: UInt32, rdata: RData) {
        self.name = name
        self.type = type
        self.rrClass = rrClass
        self.ttl = ttl
        self.rdata = rdata
    }
}

public struct Question: Hashable, Sendable {
    public var name: DNSName
    public var type: RRType
    public var qclass: RRClass

    public init(name: DNSName, type: RRType, qclass: RRClass = .in) {
        self.name = name
        self.type = type
        self.qclass = qclass
    }
}

/// The OPT pseudo-record of EDNS(0) (RFC 6891 §6).
public struct EDNS: Hashable, Sendable {
    /// Requestor's UDP payload size, as sent (callers clamp values below 512 to 512, §6.2.5).
    public var udpPayloadSize: UInt16
    public var extendedRCodeHigh: UInt8
    public var version: UInt8
    public var dnssecOK: Bool
    public var options: [Option]

    public struct Option: Hashable, Sendable {
        public var code: UInt16
        public var data: [UInt8]
        public init(code: UInt16, data: [UInt8]) {
            self.code = code
            self.data = data
        }

        /// edns-tcp-keepalive (RFC 7828 §3.1).
        public static let tcpKeepaliveCode: UInt16 = 11

        /// edns-tcp-keepalive with a TIMEOUT: `timeout` in units of 100 ms, rounded down and
        /// capped at 65535 units (about 1.8 hours).
        public static func tcpKeepalive(timeout: Duration) -> Option {
            let units = UInt16(clamping: max(0, Int64(timeout / .milliseconds(100))))
            return Option(code: tcpKeepaliveCode, data: [UInt8(units >> 8), UInt8(units & 0xFF)])
        }
    }

    /// The query's edns-tcp-keepalive option, if it has one.
    public var asksTCPKeepalive: Bool { options.contains { $0.code == Option.tcpKeepaliveCode } }

    public init(
        udpPayloadSize: UInt16 = 1232, extendedRCodeHigh: UInt8 = 0, version: UInt8 = 0, dnssecOK: Bool = false,
        options: [Option] = []
    ) {
        self.udpPayloadSize = udpPayloadSize
        self.extendedRCodeHigh = extendedRCodeHigh
        self.version = version
        self.dnssecOK = dnssecOK
        self.options = options
    }
}

// MARK: - Types, classes and codes

/// A resource record type (RFC 1035 §3.2.2 and successors).
public struct RRType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let a = RRType(1)
    public static let ns = RRType(2)
    public static let cname = RRType(5)
    public static let soa = RRType(6)
    public static let ptr = RRType(12)
    public static let hinfo = RRType(13)
    public static let mx = RRType(15)
    public static let txt = RRType(16)
    public static let aaaa = RRType(28)
    public static let srv = RRType(33)
    public static let sig = RRType(24)
    public static let key = RRType(25)
    public static let dname = RRType(39)
    public static let opt = RRType(41)
    public static let ds = RRType(43)
    public static let rrsig = RRType(46)
    public static let nsec = RRType(47)
    public static let nsec3 = RRType(50)
    public static let ixfr = RRType(251)
    public static let axfr = RRType(252)
    public static let any = RRType(255)

    public var description: String {
        switch self {
        case .a: return "A"
        case .ns: return "NS"
        case .cname: return "CNAME"
        case .soa: return "SOA"
        case .ptr: return "PTR"
        case .hinfo: return "HINFO"
        case .mx: return "MX"
        case .txt: return "TXT"
        case .aaaa: return "AAAA"
        case .srv: return "SRV"
        case .sig: return "SIG"
        case .key: return "KEY"
        case .dname: return "DNAME"
        case .opt: return "OPT"
        case .ds: return "DS"
        case .rrsig: return "RRSIG"
        case .nsec: return "NSEC"
        case .nsec3: return "NSEC3"
        case .ixfr: return "IXFR"
        case .axfr: return "AXFR"
        case .any: return "ANY"
        default: return "TYPE\(rawValue)"
        }
    }
}

/// A record class. Only IN (and ANY in questions) is served; the mDNS top bits (QU in
/// questions, cache-flush in records, RFC 6762 §18.12–13) are masked before a class gets here.
public struct RRClass: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let `in` = RRClass(1)
    public static let any = RRClass(255)
    /// DNS Update's "delete an RR from an RRset" (RFC 2136 §2.5.4).
    public static let none = RRClass(254)

    public var description: String {
        switch self {
        case .in: return "IN"
        case .any: return "ANY"
        case .none: return "NONE"
        default: return "CLASS\(rawValue)"
        }
    }
}

/// Response codes, including the extended ones carried in OPT (RFC 6891 §6.1.3).
public struct RCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let noError = RCode(0)
    public static let formErr = RCode(1)
    public static let servFail = RCode(2)
    public static let nxDomain = RCode(3)
    public static let notImp = RCode(4)
    public static let refused = RCode(5)
    /// DNS Update: a name that should not exist does (RFC 2136 §2.2); SRP: the name belongs to
    /// another key (RFC 9665 §3.3.3).
    public static let yxDomain = RCode(6)
    public static let notAuth = RCode(9)
    public static let badVers = RCode(16)

    public var description: String {
        switch self {
        case .noError: return "NOERROR"
        case .formErr: return "FORMERR"
        case .servFail: return "SERVFAIL"
        case .nxDomain: return "NXDOMAIN"
        case .notImp: return "NOTIMP"
        case .refused: return "REFUSED"
        case .yxDomain: return "YXDOMAIN"
        case .notAuth: return "NOTAUTH"
        case .badVers: return "BADVERS"
        default: return "RCODE\(rawValue)"
        }
    }
}

public struct Opcode: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let query = Opcode(rawValue: 0)
    /// DNS Update (RFC 2136), which SRP updates are (RFC 9665).
    public static let update = Opcode(rawValue: 5)
    public static let dso = Opcode(rawValue: 6)
}

// MARK: - The client

/// The transport a query arrived on; decides the size limit of the answer.
public enum DNSTransport: String, Sendable, Hashable {
    case udp
    case tcp
}

/// Who sent a query, and how: built once by the front end that read it, and read by
/// everything after it (the rate limiter, the client ACL, the link views, the private realms,
/// the answer's size limit and edns-tcp-keepalive, DNS Push, the logs).
public struct DNSClient: Sendable, Hashable, CustomStringConvertible {
    /// Address bytes: 4 for IPv4, 16 for IPv6 (IPv4-mapped IPv6 is unmapped to 4).
    public var address: [UInt8]
    public var port: Int
    public var transport: DNSTransport
    /// The idle timeout the server holds for the TCP connection the query came on, to be told
    /// to a client that asks with edns-tcp-keepalive (RFC 7828 §3.3.2). Zero when the server
    /// wants the connection closed; nil over UDP and inside a DSO session, where the option
    /// must not be sent (RFC 7828 §3.3.1, RFC 8490 §7.1.2).
    public var tcpIdleTimeout: Duration?

    public init(address: [UInt8], port: Int, transport: DNSTransport, tcpIdleTimeout: Duration? = nil) {
        self.address = address
        self.port = port
        self.transport = transport
        self.tcpIdleTimeout = tcpIdleTimeout
    }

    /// `192.0.2.1:53/udp`, `[2001:db8::1]:53/tcp`.
    public var description: String {
        let text = IPAddressText.format(address)
        return (address.count == 16 ? "[\(text)]" : text) + ":\(port)/\(transport.rawValue)"
    }
}
