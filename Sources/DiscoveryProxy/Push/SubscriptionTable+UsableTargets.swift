import DNSWire
import MDNS

/// RFC 8766 §5.5.2's unusable-SRV rule for DNS Push, as unicast answers apply it
/// (`UsableTargets`): an SRV whose target's addresses are all known and none usable by the
/// subscriber, and the PTR and TXT of an instance whose every SRV is such, are not pushed.
/// Usability changes without any change to the subscribed browse (the target's address
/// browses settle or change), so each subscriber remembers what it was not told
/// (`Subscriber.withheld`): a record is pushed as added once its target becomes usable, and
/// as removed when it stops being usable. A change to a browse re-evaluates that browse's
/// subscribers and, for SRV, A and AAAA changes, every PTR, SRV and TXT subscription on the
/// link (the few that depend on them); `recheck` does the same when address browses settle.
extension SubscriptionTable {
    /// The types whose records the rule may withhold.
    static let ruledTypes: Set<RRType> = [.ptr, .srv, .txt]
    /// The types whose changes can make another subscription's records (un)usable.
    static let targetTypes: Set<RRType> = [.srv, .a, .aaaa]

    /// What subscribers are told after `changes` to `key`'s browse (already applied to
    /// `table`). `enabled`: the rule applies (link-local suppression is on). `pending` is set
    /// when some target's addresses have not settled yet: `recheck` the link later.
    mutating func changes(
        after changes: [BrowseTable.RecordChange], of key: BrowseKey, in table: BrowseTable, now: Duration,
        enabled: Bool, pending: inout Bool
    ) -> [PushDelivery] {
        guard enabled, Self.ruledTypes.contains(key.type) || Self.targetTypes.contains(key.type) else {
            return changes.flatMap { change in
                switch change {
                case .added(let record): self.changes(for: key, adding: record)
                case .removed(let record): self.changes(for: key, removing: record)
                }
            }
        }
        var deliveries: [PushDelivery] = []
        if byKey[key] != nil {
            deliveries += reevaluate(key, changes: changes, in: table, now: now, pending: &pending)
        }
        if Self.targetTypes.contains(key.type), !changes.isEmpty {
            for other in dependents(on: key.interface) where other != key {
                deliveries += reevaluate(other, changes: [], in: table, now: now, pending: &pending)
            }
        }
        return deliveries
    }

    /// The subscriptions on `interface` whose records the rule may withhold, re-evaluated
    /// (address browses may have settled since).
    mutating func recheck(_ interface: String, in table: BrowseTable, now: Duration, pending: inout Bool)
        -> [PushDelivery]
    {
        dependents(on: interface).flatMap { reevaluate($0, changes: [], in: table, now: now, pending: &pending) }
    }

    /// The browse lost everything: nothing is withheld any more (its subscribers are sent
    /// one RRset removal, `changes(clearing:)`).
    mutating func forgetWithheld(_ key: BrowseKey) {
        guard var list = byKey[key] else { return }
        for index in list.indices { list[index].withheld = [] }
        byKey[key] = list
    }

    /// What `subscriber`, new on `key`'s browse, is told first: the records it may use; the
    /// rest are remembered as withheld.
    static func initial(
        for subscriber: inout Subscriber, records: [CachedRecord], key: BrowseKey, in table: BrowseTable, now: Duration,
        enabled: Bool, pending: inout Bool
    ) -> [PushChange] {
        guard enabled, subscriber.appliesUsableRule, ruledTypes.contains(key.type), !records.isEmpty else {
            return records.compactMap { subscriber.change(for: $0, adding: true) }
        }
        let snapshot = table.snapshot(for: key, now: now)
        if snapshot.hasPendingTargets { pending = true }
        let usable = UsableTargets(snapshot: snapshot, presentation: subscriber.presentation, enabled: true)
        return records.compactMap { record in
            guard usable.shows(record) else {
                if let wire = subscriber.wire(of: record) { subscriber.withheld.insert(wire) }
                return nil
            }
            return subscriber.change(for: record, adding: true)
        }
    }

    /// The browses on `interface` whose subscribers' view a target's change may alter.
    private func dependents(on interface: String) -> [BrowseKey] {
        ruled[interface].map { Array($0.keys) } ?? []
    }

    /// Tells `key`'s subscribers about `changes`, then about the records whose usability
    /// flipped. One snapshot for the browse; one `UsableTargets` per subscriber (realms differ).
    private mutating func reevaluate(
        _ key: BrowseKey, changes: [BrowseTable.RecordChange], in table: BrowseTable, now: Duration, pending: inout Bool
    ) -> [PushDelivery] {
        guard var list = byKey[key] else { return [] }
        // Subscribers outside the rule are told the changes as they are, without a snapshot.
        if !list.contains(where: \.appliesUsableRule) {
            return list.compactMap { subscriber in
                let out = changes.compactMap { change -> PushChange? in
                    switch change {
                    case .added(let record): subscriber.change(for: record, adding: true)
                    case .removed(let record): subscriber.change(for: record, adding: false)
                    }
                }
                return out.isEmpty
                    ? nil : PushDelivery(sink: subscriber.sink, subscription: subscriber.id, changes: out)
            }
        }
        let snapshot = table.snapshot(for: key, now: now)
        if snapshot.hasPendingTargets { pending = true }
        var deliveries: [PushDelivery] = []
        for index in list.indices {
            var subscriber = list[index]
            let usable = UsableTargets(
                snapshot: snapshot, presentation: subscriber.presentation,
                enabled: subscriber.appliesUsableRule && Self.ruledTypes.contains(key.type))
            var out: [PushChange] = []
            for change in changes {
                switch change {
                case .added(let record):
                    if usable.shows(record) {
                        subscriber.change(for: record, adding: true).map { out.append($0) }
                    } else if let wire = subscriber.wire(of: record) {
                        subscriber.withheld.insert(wire)
                    }
                case .removed(let record):
                    // A withheld record was never seen: its removal is not news.
                    guard let wire = subscriber.wire(of: record), subscriber.withheld.remove(wire) == nil else {
                        continue
                    }
                    subscriber.change(for: record, adding: false).map { out.append($0) }
                }
            }
            if !usable.showsEverything || !subscriber.withheld.isEmpty {
                for record in snapshot.answers {
                    guard let wire = subscriber.wire(of: record) else { continue }
                    let shows = usable.shows(record)
                    if shows, subscriber.withheld.remove(wire) != nil {
                        subscriber.change(for: record, adding: true).map { out.append($0) }
                    } else if !shows, subscriber.withheld.insert(wire).inserted {
                        subscriber.change(for: record, adding: false).map { out.append($0) }
                    }
                }
            }
            list[index] = subscriber
            if !out.isEmpty {
                deliveries.append(PushDelivery(sink: subscriber.sink, subscription: subscriber.id, changes: out))
            }
        }
        byKey[key] = list
        return deliveries
    }
}
