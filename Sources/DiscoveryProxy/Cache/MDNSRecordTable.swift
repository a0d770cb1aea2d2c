import DNSWire
import MDNS

/// The records of one mDNS query mapped to values, laid out for what a query usually holds:
/// one record (an SRV, a TXT, an address) or a few.
///
/// Up to `indexThreshold` entries it is one small array searched linearly: a fraction of the
/// memory of a `Dictionary`, whose smallest storage has a header, a bitmap and room for
/// several entries. The proxy holds one of these per browse and a browse per SRV, TXT and
/// address name it was asked, so this is much of its memory per known instance. Above the
/// threshold a hash index is kept beside the array, so that a service type with thousands of
/// instances stays O(1) per event.
struct MDNSRecordTable<Value> {
    private var entries: [(record: MDNSRecord, value: Value)] = []
    /// Position of each record in `entries`, only while there are more than `indexThreshold`.
    private var index: [MDNSRecord: Int]?

    /// A service type's PTR browse holds one record per instance; most types on a site have a
    /// few dozen at most. Searching 32 entries (only when mDNS reports a change) costs far
    /// less than an index for every such type would hold: about 80 bytes per instance.
    static var indexThreshold: Int { 32 }

    init() {}

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    var records: some Collection<MDNSRecord> { entries.lazy.map(\.record) }
    var values: some Collection<Value> { entries.lazy.map(\.value) }

    subscript(record: MDNSRecord) -> Value? {
        get { position(of: record).map { entries[$0].value } }
        set {
            if let newValue {
                set(newValue, for: record)
            } else {
                removeValue(forKey: record)
            }
        }
    }

    /// The record as stored, equal to `record`: lets a holder share the stored arrays.
    func storedRecord(equalTo record: MDNSRecord) -> MDNSRecord? {
        position(of: record).map { entries[$0].record }
    }

    subscript(record: MDNSRecord, default value: @autoclosure () -> Value) -> Value {
        self[record] ?? value()
    }

    @discardableResult
    mutating func removeValue(forKey record: MDNSRecord) -> Value? {
        guard let position = position(of: record) else { return nil }
        let removed = entries[position].value
        // Swap-remove: order is not kept (holders that need one keep their own).
        let last = entries.count - 1
        if position != last {
            entries[position] = entries[last]
            index?[entries[position].record] = position
        }
        entries.removeLast()
        index?[record] = nil
        if entries.count <= Self.indexThreshold / 2 { index = nil }
        return removed
    }

    mutating func removeAll() {
        entries = []
        index = nil
    }

    /// Changes every value in place.
    mutating func updateValues(_ body: (inout Value) -> Void) {
        for position in entries.indices { body(&entries[position].value) }
    }

    /// Removes the entries whose value matches; returns them.
    mutating func removeAll(where shouldRemove: (Value) -> Bool) -> [(record: MDNSRecord, value: Value)] {
        let removed = entries.filter { shouldRemove($0.value) }
        guard !removed.isEmpty else { return [] }
        entries.removeAll { shouldRemove($0.value) }
        reindex()
        return removed
    }

    private mutating func set(_ value: Value, for record: MDNSRecord) {
        if let position = position(of: record) {
            entries[position].value = value
            return
        }
        entries.append((record, value))
        if index != nil {
            index![record] = entries.count - 1
        } else if entries.count > Self.indexThreshold {
            reindex()
        }
    }

    /// Builds the hash index when above the threshold, drops it below.
    private mutating func reindex() {
        guard entries.count > Self.indexThreshold else {
            index = nil
            return
        }
        var built: [MDNSRecord: Int] = [:]
        built.reserveCapacity(entries.count * 2)
        for (position, entry) in entries.enumerated() { built[entry.record] = position }
        index = built
    }

    private func position(of record: MDNSRecord) -> Int? {
        if let index { return index[record] }
        return entries.firstIndex { $0.record == record }
    }
}

extension MDNSRecordTable: Sequence {
    func makeIterator() -> IndexingIterator<[(record: MDNSRecord, value: Value)]> {
        entries.makeIterator()
    }
}

extension MDNSRecordTable: Sendable where Value: Sendable {}

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
        case .a(let address)?, .aaaa(let address)?:
            return IPPrefix.isLinkLocal(address) || PrivateRealms.isPrivate(address)
        default: return false
        }
    }
}
