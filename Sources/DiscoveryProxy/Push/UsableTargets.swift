import DNSWire

/// RFC 8766 §5.5.2: "DNS SRV records that reference target host names that have no addresses
/// usable by the requester should be suppressed, and likewise, DNS-SD service browsing PTR
/// records that point to unusable SRV records". The proxy can tell only for a target whose
/// addresses it fully knows (`Snapshot.settledHosts`) and that has at least one, all of them
/// left out for this client (link-local, or private in another realm): a host it knows
/// nothing about, or no address of yet, is shown, so that lost mDNS packets never hide a
/// service. Applies while link-local suppression is on.
struct UsableTargets {
    /// Hosts with known addresses, none of them shown to this client.
    private var unusableHosts: Set<DNSName> = []
    /// Instances all of whose known SRV records point to unusable hosts.
    private var unusableInstances: Set<DNSName> = []

    init(snapshot: Snapshot, presentation: ZonePresentation, enabled: Bool) {
        guard enabled, !snapshot.settledHosts.isEmpty else { return }
        var addresses: [DNSName: (known: Int, usable: Int)] = [:]
        for record in snapshot.additional where record.type == .a || record.type == .aaaa {
            guard snapshot.settledHosts.contains(record.localName) else { continue }
            addresses[record.localName, default: (0, 0)].known += 1
            if presentation.rewritten(record) != nil { addresses[record.localName, default: (0, 0)].usable += 1 }
        }
        unusableHosts = Set(addresses.filter { $0.value.known > 0 && $0.value.usable == 0 }.keys)
        guard !unusableHosts.isEmpty else { return }
        var services: [DNSName: (count: Int, unusable: Int)] = [:]
        for record in snapshot.answers + snapshot.additional where record.type == .srv {
            guard let target = record.localTarget else { continue }
            services[record.localName, default: (0, 0)].count += 1
            if unusableHosts.contains(target) { services[record.localName, default: (0, 0)].unusable += 1 }
        }
        unusableInstances = Set(services.filter { $0.value.unusable == $0.value.count }.keys)
    }

    /// No host is known to be unusable: every record is shown.
    var showsEverything: Bool { unusableHosts.isEmpty }

    /// Whether `record` is shown: not an SRV to an unusable host, nor a PTR to (or the TXT of)
    /// an instance whose every SRV is.
    func shows(_ record: CachedRecord) -> Bool {
        guard !unusableHosts.isEmpty else { return true }
        switch record.type {
        case .srv: return record.localTarget.map { !unusableHosts.contains($0) } ?? true
        case .ptr: return record.localTarget.map { !unusableInstances.contains($0) } ?? true
        case .txt: return !unusableInstances.contains(record.localName)
        default: return true
        }
    }
}
