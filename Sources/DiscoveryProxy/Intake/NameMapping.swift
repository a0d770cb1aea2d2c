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
