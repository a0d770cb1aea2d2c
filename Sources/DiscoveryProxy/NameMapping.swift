import DNSWire

/// `.local` ↔ zone translation of RDATA (RFC 8766 §5.5).
enum NameMapping {
    /// Rewrites `.local` names inside RDATA into `zone` (names elsewhere are left alone,
    /// §5.5: "names that do not end in .local are not translated"), turns an empty TXT into
    /// the single zero byte RFC 6763 §6.1 requires, and suppresses link-local addresses
    /// (§5.5.2) when asked. Returns nil for a record that must not be shown.
    static func toZone(_ rdata: RData, zone: DNSName, suppressLinkLocal: Bool) -> RData? {
        switch rdata {
        case .a(let address), .aaaa(let address):
            return suppressLinkLocal && IPPrefix.isLinkLocal(address) ? nil : rdata
        case .txt(let bytes):
            return bytes.isEmpty ? .txt([0]) : rdata
        default:
            return rdata.mapNames { $0.replacingSuffix(Catalog.local, with: zone) ?? $0 }
        }
    }
}
