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

    public var description: String { self == .in ? "IN" : (self == .any ? "ANY" : "CLASS\(rawValue)") }
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
    public static let dso = Opcode(rawValue: 6)
}
