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
