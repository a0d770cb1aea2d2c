import DNSWire

/// `.local` ↔ zone translation of RDATA (RFC 8766 §5.5).
enum NameMapping {
    /// Rewrites `.local` names inside RDATA into `zone` (names elsewhere are left alone,
    /// §5.5: "names that do not end in .local are not translated"), turns an empty TXT into
    /// the single zero byte RFC 6763 §6.1 requires, and suppresses link-local addresses
    /// (§5.5.2) when asked. Returns nil for a record that must not be shown, including one
    /// with a `.local` name that is too long for the zone (over 255 octets once rewritten,
    /// RFC 1035 §2.3.4): left as it is it would leak `.local` into a unicast answer.
    static func toZone(_ rdata: RData, zone: DNSName, suppressLinkLocal: Bool) -> RData? {
        switch rdata {
        case .a(let address), .aaaa(let address):
            return suppressLinkLocal && IPPrefix.isLinkLocal(address) ? nil : rdata
        case .txt(let bytes):
            return bytes.isEmpty ? .txt([0]) : rdata
        default:
            var unmappable = false
            let mapped = rdata.mapNames { name in
                guard name.isSubdomain(of: Catalog.local) else { return name }
                guard let inZone = name.replacingSuffix(Catalog.local, with: zone) else {
                    unmappable = true
                    return name
                }
                return inZone
            }
            return unmappable ? nil : mapped
        }
    }
}
