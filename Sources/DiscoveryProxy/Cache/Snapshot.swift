import DNSWire
import MDNS

/// What a browse and its related browses hold, copied out of the lock to build an answer.
struct Snapshot: Sendable {
    var answers: [CachedRecord] = []
    /// SRV/TXT of PTR targets, then addresses of SRV targets (RFC 6763 §12).
    var additional: [CachedRecord] = []
    /// mDNS has had its full say (`DiscoveryProxy.mdnsWindow`), so an empty answer is final;
    /// otherwise a negative is cached briefly (`DiscoveryProxy.provisionalTTL`). Also false
    /// while an SRV target whose known addresses may all be unusable is not settled: the
    /// answer may lose that SRV once it is (`UsableTargets`), so it is not replayed.
    var isSettled = true
    /// SRV targets whose A and AAAA browses have both had their say (results, or the full
    /// mDNS window): their addresses in `additional` are all there are (`UsableTargets`).
    var settledHosts: Set<DNSName> = []
    /// Some SRV target's known addresses may all be unusable, but its address browses have
    /// not settled yet: whether it is usable is still to be decided.
    var hasPendingTargets = false
    /// The link's devices may still add to the answers: the browse is within its link's usual
    /// spread of answer times, or young (`AnswerTimes`). Its TTL is
    /// `DiscoveryProxy.provisionalTTL`, and it is not settled (not replayed).
    var isProvisional = false
}

extension BrowseTable {
    /// What `key`'s browse holds now, with additionals.
    func snapshot(for key: BrowseKey, now: Duration) -> Snapshot {
        guard let browse = browses[key] else { return Snapshot() }
        var snapshot = snapshot(answers: browse.orderedRecords, interface: key.interface, now: now)
        snapshot.isSettled = snapshot.isSettled && browse.isSettled(now: now)
        if browse.hasResults && mayBeIncomplete(key, browse, now: now) {
            snapshot.isProvisional = true
            snapshot.isSettled = false
        }
        return snapshot
    }

    /// A released browse's last results, with what live browses know about them.
    func optimisticSnapshot(_ stale: ReleasedBrowse, key: BrowseKey, now: Duration) -> Snapshot {
        snapshot(answers: stale.records, interface: key.interface, now: now)
    }

    /// Every record the live browses of `interface` hold for `name`, by type (an ANY query).
    func records(named name: DNSName, on interface: String) -> [CachedRecord] {
        browses
            .filter { $0.key.interface == interface && $0.key.name == name }
            .sorted { $0.key.type.rawValue < $1.key.type.rawValue }
            .flatMap { $0.value.orderedRecords }
    }

    /// The answers plus what live browses on the same link know about them (additionals).
    private func snapshot(answers: [CachedRecord], interface: String, now: Duration) -> Snapshot {
        var snapshot = Snapshot(answers: answers)
        func known(_ name: DNSName, _ type: RRType) -> [CachedRecord] {
            browses[BrowseKey(interface: interface, name: name, type: type)]?.orderedRecords ?? []
        }
        func settled(_ name: DNSName, _ type: RRType) -> Bool {
            browses[BrowseKey(interface: interface, name: name, type: type)]?.isSettled(now: now) ?? false
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
            let addresses = known(host, .a) + known(host, .aaaa)
            snapshot.additional += addresses
            if settled(host, .a) && settled(host, .aaaa) {
                snapshot.settledHosts.insert(host)
            } else if !addresses.isEmpty && addresses.allSatisfy(Self.mayBeUnusable) {
                snapshot.isSettled = false
                snapshot.hasPendingTargets = true
            }
        }
        return snapshot
    }

    /// A link-local or private address: unusable for some clients (RFC 8766 §5.5.2).
    private static func mayBeUnusable(_ record: CachedRecord) -> Bool {
        switch record.rdata {
        case .a(let address)?, .aaaa(let address)?: return IPPrefix.isLinkLocal(address) || PrivateRealms.isPrivate(address)
        default: return false
        }
    }
}
