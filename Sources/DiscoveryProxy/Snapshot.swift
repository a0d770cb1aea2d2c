import DNSWire
import MDNS

/// What a browse and its related browses hold, copied out of the lock to build an answer.
struct Snapshot: Sendable {
    var answers: [CachedRecord] = []
    /// SRV/TXT of PTR targets, then addresses of SRV targets (RFC 6763 §12).
    var additional: [CachedRecord] = []
    /// mDNS has had its full say (`DiscoveryProxy.mdnsWindow`), so an empty answer is final;
    /// otherwise a negative is cached briefly (`DiscoveryProxy.provisionalTTL`).
    var isSettled = true
}

extension BrowseTable {
    /// What `key`'s browse holds now, with additionals.
    func snapshot(for key: BrowseKey, now: Duration) -> Snapshot {
        guard let browse = browses[key] else { return Snapshot() }
        var snapshot = snapshot(answers: browse.orderedRecords, interface: key.interface)
        snapshot.isSettled = browse.hasResults || now - browse.startedAt >= DiscoveryProxy.mdnsWindow
        return snapshot
    }

    /// A released browse's last results, with what live browses know about them.
    func optimisticSnapshot(_ stale: ReleasedBrowse, key: BrowseKey) -> Snapshot {
        snapshot(answers: stale.records, interface: key.interface)
    }

    /// Every record the live browses of `interface` hold for `name`, by type (an ANY query).
    func records(named name: DNSName, on interface: String) -> [CachedRecord] {
        browses
            .filter { $0.key.interface == interface && $0.key.name == name }
            .sorted { $0.key.type.rawValue < $1.key.type.rawValue }
            .flatMap { $0.value.orderedRecords }
    }

    /// The answers plus what live browses on the same link know about them (additionals).
    private func snapshot(answers: [CachedRecord], interface: String) -> Snapshot {
        var snapshot = Snapshot(answers: answers)
        func known(_ name: DNSName, _ type: RRType) -> [CachedRecord] {
            browses[BrowseKey(interface: interface, name: name, type: type)]?.orderedRecords ?? []
        }
        var hosts: [DNSName] = []
        for record in snapshot.answers {
            guard let target = record.localTarget else { continue }
            if record.type == .ptr {
                let srv = known(target, .srv)
                snapshot.additional += srv + known(target, .txt)
                hosts += srv.compactMap(\.localTarget)
            } else if record.type == .srv {
                hosts.append(target)
            }
        }
        var seen = Set<DNSName>()
        for host in hosts where seen.insert(host).inserted {
            snapshot.additional += known(host, .a) + known(host, .aaaa)
        }
        return snapshot
    }
}
