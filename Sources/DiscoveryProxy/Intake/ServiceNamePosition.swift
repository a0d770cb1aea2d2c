import DNSWire

/// Where a name below a link zone sits in DNS-SD's naming structure (RFC 6763), and so which
/// record types it can hold. Decided from the labels alone, before any mDNS query.
///
/// Resolvers that minimise query names (RFC 9156) walk down to a browse name one label at a
/// time, asking A or NS at `_tcp.<zone>`, `_ipp._tcp.<zone>` and
/// `Printer._ipp._tcp.<zone>`. None of these names can hold an address, so an mDNS query for
/// one would only ever end in the negative timeout. The rule, for a name whose label right
/// below the zone begins with an underscore (DNS-SD structure starts there, as service types
/// sit directly under the domain, RFC 6763 §4.1, §7):
///
/// | labels below the zone | position | types |
/// |---|---|---|
/// | `_tcp`, `_udp` | protocol (§7) | none: an empty non-terminal |
/// | `_dns-sd._udp` | enumeration parent (§9, §11) | none |
/// | `_services._dns-sd._udp` | service type enumeration (§9) | PTR |
/// | `<other>._dns-sd._udp` | not defined (b/db/lb/r/dr are answered before this) | none |
/// | `_service._tcp`, `_service._udp` | service type (§4.1, §7) | PTR |
/// | `_sub._service._proto` | subtype parent (§7.1) | none |
/// | `<subtype>._sub._service._proto` | subtype (§7.1) | PTR |
/// | `<instance>._service._proto` | service instance (§4.1, §6) | SRV, TXT |
/// | anything else | not a DNS-SD name | none |
///
/// "None" means the name exists at most as an empty non-terminal: every question there is
/// NOERROR with no data at once, never NXDOMAIN (RFC 8020), as RFC 8766 §5.6 says of names
/// below a link zone. ANY at a name with types is left to mDNS's cache (`answerAny`).
///
/// A name whose label right below the zone has no underscore is a host or something under one
/// (macOS publishes `_kerberos.<host>.local` TXT), and is not restricted: `init` then returns
/// nil. Reverse zones follow their own rule (`IPPrefix.isReverseAddress`).
enum ServiceNamePosition: Equatable, Sendable {
    case serviceType
    case subtype
    case serviceTypeEnumeration
    case instance
    /// An empty non-terminal of the structure, or a name that DNS-SD never uses.
    case empty

    /// The position of a name from its labels below a forward (link) zone, leftmost first;
    /// nil when DNS-SD structure does not apply (a host name, or below one).
    init?(forward relative: [[UInt8]]) {
        guard let top = relative.last, Self.isUnderscored(top) else { return nil }
        let count = relative.count
        guard Self.isProtocol(top) else {
            self = .empty
            return
        }
        if count == 1 {
            self = .empty  // `_tcp`, `_udp`
            return
        }
        let service = relative[count - 2]
        guard Self.isUnderscored(service) else {
            self = .empty  // `host._tcp`: not a service type
            return
        }
        if Self.is(service, Label.dnsSD) && Self.is(top, Label.udp) {
            self = count == 3 && Self.is(relative[0], Label.services) ? .serviceTypeEnumeration : .empty
            return
        }
        switch count {
        case 2: self = .serviceType
        case 3: self = Self.is(relative[0], Label.sub) ? .empty : .instance
        case 4: self = Self.is(relative[1], Label.sub) ? .subtype : .empty
        default: self = .empty
        }
    }

    /// The record types a name in this position can hold.
    var recordTypes: [RRType] {
        switch self {
        case .serviceType, .subtype, .serviceTypeEnumeration: [.ptr]
        case .instance: [.srv, .txt]
        case .empty: []
        }
    }

    /// Whether a question of `type` here can be answered only negatively, at once.
    func excludes(_ type: RRType) -> Bool {
        type == .any ? recordTypes.isEmpty : !recordTypes.contains(type)
    }

    private static func isUnderscored(_ label: [UInt8]) -> Bool { label.first == UInt8(ascii: "_") }

    private static func isProtocol(_ label: [UInt8]) -> Bool { self.is(label, Label.tcp) || self.is(label, Label.udp) }

    private static func `is`(_ label: [UInt8], _ known: [UInt8]) -> Bool { DNSName.labelsEqual(label, known) }

    /// The labels the rule names, made once (planning runs for every query not replayed).
    private enum Label {
        static let tcp = Array("_tcp".utf8)
        static let udp = Array("_udp".utf8)
        static let dnsSD = Array("_dns-sd".utf8)
        static let services = Array("_services".utf8)
        static let sub = Array("_sub".utf8)
    }
}
