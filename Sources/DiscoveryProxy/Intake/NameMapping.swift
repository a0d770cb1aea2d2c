import DNSWire

/// `.local` ↔ zone translation of names and RDATA (RFC 8766 §5.1, §5.5): the one place
/// names cross between a link's zone and mDNS.
enum NameMapping {
    /// A name of `zone` as asked on the link (§5.1): the zone suffix replaced by `local.`.
    /// Nil when the name is not in the zone, or too long once rewritten.
    static func toLocal(_ name: DNSName, zone: DNSName) -> DNSName? {
        name.replacingSuffix(zone, with: Catalog.local)
    }

    /// A `.local` name as shown in `zone`, or in `hostZone` when it is a host name (one label
    /// under `.local`, RFC 6762 §3; RFC 8766 §5.3's LDH zone); nil when not in `.local` or
    /// too long for the zone (over 255 octets, RFC 1035 §2.3.4).
    static func toZone(_ name: DNSName, zone: DNSName, hostZone: DNSName? = nil) -> DNSName? {
        name.replacingSuffix(Catalog.local, with: hostZone.flatMap { isHostName(name) ? $0 : nil } ?? zone)
    }

    /// One label under `.local` that is not a DNS-SD structure label (`_tcp`, `_services`).
    static func isHostName(_ name: DNSName) -> Bool {
        guard let relative = name.labels(before: Catalog.local), relative.count == 1 else { return false }
        return relative[0].first != UInt8(ascii: "_")
    }

    /// Rewrites `.local` names inside RDATA into `zone` (names elsewhere are left alone,
    /// §5.5: "names that do not end in .local are not translated"), turns an empty TXT into
    /// the single zero byte RFC 6763 §6.1 requires, and suppresses link-local addresses, and
    /// private ones for a client of another realm (§5.5.2, `PrivateRealms`), when asked.
    /// Returns nil for a record that must not be shown, including one with a `.local` name
    /// that is too long for the zone (over 255 octets once rewritten, RFC 1035 §2.3.4): left
    /// as it is it would leak `.local` into a unicast answer.
    static func toZone(
        _ rdata: RData, zone: DNSName, hostZone: DNSName? = nil, suppressLinkLocal: Bool, hidePrivate: Bool = false
    ) -> RData? {
        switch rdata {
        case .a(let address), .aaaa(let address):
            if suppressLinkLocal && IPPrefix.isLinkLocal(address) { return nil }
            return hidePrivate && PrivateRealms.isPrivate(address) ? nil : rdata
        case .txt(let bytes):
            return bytes.isEmpty ? .txt([0]) : rdata
        default:
            var unmappable = false
            let mapped = rdata.mapNames { name in
                guard name.isSubdomain(of: Catalog.local) else { return name }
                guard let inZone = toZone(name, zone: zone, hostZone: hostZone) else {
                    unmappable = true
                    return name
                }
                return inZone
            }
            return unmappable ? nil : mapped
        }
    }
}

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
