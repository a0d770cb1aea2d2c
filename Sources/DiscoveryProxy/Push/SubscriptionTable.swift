import DNSWire
import MDNS

/// Receives the changes of one DNS Push subscription (a `PushSession`). Called outside the
/// proxy's lock, from the mDNS backend's thread.
protocol PushSink: AnyObject, Sendable {
    func deliver(_ changes: [PushChange], subscription: UInt16)
}

/// One DNS Push subscription riding on a shared browse.
struct Subscriber: Sendable {
    var session: Int
    var id: UInt16
    /// The name as the client subscribed it: owner of every change sent (like the query name
    /// of a unicast answer), so the client's own spelling comes back.
    var owner: DNSName
    var type: RRType
    /// Records are sent as unicast answers give them.
    var presentation: ZonePresentation
    var sink: any PushSink
    /// RDATA (as it would be sent) of the browse's records held back by the unusable-target
    /// rule (`SubscriptionTable+UsableTargets`).
    var withheld: Set<[UInt8]> = []
    /// False for the mDNS gateway, which judges usability itself (it announces an instance
    /// only with a routable address) and must see the instances it holds back to report them.
    var appliesUsableRule = true

    /// The change this subscriber is told for a cached record, nil when the record is not
    /// shown to clients (suppressed address, filtered service type, undecodable RDATA). avahi
    /// does not expose the received TTLs, so additions carry RFC 6762 §10's defaults (RFC 8765
    /// §6.3.1 wants mDNS TTLs, not the 10 s unicast cap).
    func change(for record: CachedRecord, adding: Bool) -> PushChange? {
        guard let wire = wire(of: record) else { return nil }
        return adding
            ? .add(owner, record.type, ttl: MDNSRecord.defaultTTL(for: record.type), rdata: wire)
            : .remove(owner, record.type, rdata: wire)
    }
}

extension Subscriber {
    /// The RDATA this subscriber is sent for `record`; nil when it is not shown.
    func wire(of record: CachedRecord) -> [UInt8]? {
        guard let rdata = presentation.rdata(of: record) else { return nil }
        return try? rdata.wireBytes()
    }
}

/// What to send to whom after a browse changed; computed under the proxy's lock, sent outside.
struct PushDelivery: Sendable {
    var sink: any PushSink
    var subscription: UInt16
    var changes: [PushChange]
}

/// Every subscriber, by the browse it listens to. Lives in the proxy's locked state.
struct SubscriptionTable: Sendable {
    /// Changed only here and in `SubscriptionTable+UsableTargets`.
    var byKey: [BrowseKey: [Subscriber]] = [:]
    private(set) var count = 0
    /// Per link, the browses of the rule's types with subscribers that apply the
    /// unusable-target rule, and how many (`dependents(on:)`): a target's change re-evaluates
    /// only those. Scanning `byKey` instead, each of a thousand far hosts' addresses went over
    /// the gateway's thousands of subscriptions, which never apply the rule.
    private(set) var ruled: [String: [BrowseKey: Int]] = [:]

    func isSubscribed(_ key: BrowseKey) -> Bool { byKey[key] != nil }

    mutating func add(_ subscriber: Subscriber, to key: BrowseKey) {
        byKey[key, default: []].append(subscriber)
        count += 1
        if subscriber.appliesUsableRule && Self.ruledTypes.contains(key.type) {
            ruled[key.interface, default: [:]][key, default: 0] += 1
        }
    }

    /// Whether the browse has no subscriber left.
    @discardableResult
    mutating func remove(session: Int, id: UInt16, from key: BrowseKey) -> Bool {
        guard var list = byKey[key], let index = list.firstIndex(where: { $0.session == session && $0.id == id })
        else { return byKey[key] == nil }
        let gone = list.remove(at: index)
        count -= 1
        byKey[key] = list.isEmpty ? nil : list
        if gone.appliesUsableRule && Self.ruledTypes.contains(key.type), let held = ruled[key.interface]?[key] {
            ruled[key.interface]?[key] = held > 1 ? held - 1 : nil
            if ruled[key.interface]?.isEmpty == true { ruled[key.interface] = nil }
        }
        return list.isEmpty
    }

    func subscribers(of key: BrowseKey) -> [Subscriber] { byKey[key] ?? [] }

    func changes(for key: BrowseKey, adding record: CachedRecord) -> [PushDelivery] {
        subscribers(of: key).compactMap { subscriber in
            subscriber.change(for: record, adding: true).map {
                PushDelivery(sink: subscriber.sink, subscription: subscriber.id, changes: [$0])
            }
        }
    }

    func changes(for key: BrowseKey, removing record: CachedRecord) -> [PushDelivery] {
        subscribers(of: key).compactMap { subscriber in
            subscriber.change(for: record, adding: false).map {
                PushDelivery(sink: subscriber.sink, subscription: subscriber.id, changes: [$0])
            }
        }
    }

    /// The browse lost everything (avahi-daemon went away or restarted): one RRset removal
    /// of the browse's type per subscriber (§6.3.1, TTL 0xFFFFFFFE).
    func changes(clearing key: BrowseKey) -> [PushDelivery] {
        subscribers(of: key).map {
            PushDelivery(sink: $0.sink, subscription: $0.id, changes: [.removeSet($0.owner, key.type)])
        }
    }
}

extension SubscriptionTable: PinnedBrowses {
    func isPinned(_ key: BrowseKey) -> Bool { isSubscribed(key) }
}
