import DNSWire

/// What one gateway route follows, by who wants it: each far instance its SRV, TXT and its
/// targets' addresses, the route itself its types and the client link's names
/// (`FarRecords.wantedChanges`). Counted per key, so that a host two instances share is
/// followed until neither wants it, and changed one owner at a time: a pass looks only at the
/// instances whose records changed, and hands on only the keys that became wanted or unwanted.
struct WantIndex: Sendable {
    /// The owner of the route's own wants (the root name is no instance).
    static let typesOwner = DNSName.root

    /// Each owner's keys (arrays, not sets: a few keys each, for a thousand instances in
    /// each of fifty routes).
    private(set) var instances: [DNSName: [RecordKey]] = [:]
    /// How many owners want each key.
    private var count: [RecordKey: Int] = [:]
    /// The instances whose SRV targets each host: who to look at when its addresses change.
    private(set) var byTarget: [DNSName: [DNSName]] = [:]
    /// Keys that became wanted, or unwanted, since the last `take`.
    private var added: Set<RecordKey> = []
    private var removed: Set<RecordKey> = []
    /// Instances to look at again, and whether the route's own wants must be computed again.
    var dirty: Set<DNSName> = []
    var typesDirty = true
    /// The types followed when the route's own wants were last computed.
    var types: Set<DNSName> = []
    /// Nothing was handed on yet: the first `take` hands on everything.
    private(set) var isNew = true

    /// Makes `keys` what `owner` wants (`targets`: an instance's SRV targets).
    mutating func set(_ keys: Set<RecordKey>, for owner: DNSName, targets: [DNSName] = []) {
        let oldKeys = instances[owner] ?? []
        let old = Set(oldKeys)
        let oldTargets = oldKeys.compactMap { $0.type == .a ? $0.name : nil }
        if keys != old {
            for key in keys.subtracting(old) {
                count[key, default: 0] += 1
                if count[key] == 1 && removed.remove(key) == nil { added.insert(key) }
            }
            for key in old.subtracting(keys) {
                count[key, default: 1] -= 1
                if count[key] == 0 {
                    count[key] = nil
                    if added.remove(key) == nil { removed.insert(key) }
                }
            }
            instances[owner] = keys.isEmpty ? nil : Array(keys)
        }
        // The targets are the names of the A keys (each target wants A and AAAA).
        let newTargets = Set(targets)
        guard newTargets != Set(oldTargets) else { return }
        for target in oldTargets where !newTargets.contains(target) {
            byTarget[target]?.removeAll { $0 == owner }
            if byTarget[target]?.isEmpty == true { byTarget[target] = nil }
        }
        for target in newTargets where !oldTargets.contains(target) { byTarget[target, default: []].append(owner) }
    }

    /// The keys that became wanted and unwanted since the last call; `everything` hands on
    /// every key wanted as `add` (and nothing as `remove`).
    mutating func take(everything: Bool) -> (add: Set<RecordKey>, remove: Set<RecordKey>, everything: Bool) {
        defer {
            added = []
            removed = []
            isNew = false
        }
        if everything { return (Set(count.keys), [], true) }
        return (added, removed, false)
    }
}
