import DNSWire

/// Where announcements go: `MulticastSender`, or a capture in tests.
protocol AnnouncementTransport: AnyObject {
    /// Why the packet could not be sent, or nil.
    func send(_ packet: [UInt8], on interface: String) -> String?
}

/// What the clients on each interface were told about each published group, and the
/// announcements and goodbyes that follow when a group changes (RFC 6762 §8.3, §8.4, §10.1,
/// §10.2). `LinkResponder` calls it as groups come and go, and answers queries from what it
/// holds (`held`); it queues (`AnnouncementQueue`) and sends (`MulticastSender`). Not
/// thread-safe: its responder calls it under its poll lock.
final class GroupAnnouncer {
    private var queue: AnnouncementQueue
    /// What each group's clients were told. Changed through `tell` only, which keeps `holders`.
    private var told: [MDNSGroup.Key: [MDNSRecord]] = [:]
    /// How many told groups hold each record, per interface: a goodbye is for a record no
    /// other group holds. Kept as `told` changes: read from `told` whole at each goodbye, it
    /// made every established group cost O(groups), the gateway's thousand far instances a
    /// second's CPU each second.
    private var holders: [Holding: Int] = [:]

    private struct Holding: Hashable {
        var interface: String
        var record: MDNSRecord
    }
    /// The records held on each interface under each name (every type): what a query there
    /// is answered from (`QueryAnswerer`). Kept with `holders`.
    /// Each with when it came (held in that order): a set, as a withdrawal removing one of a
    /// thousand PTRs from a list was most of fifty client links' churn.
    private var byName: [NameOn: [MDNSRecord: UInt64]] = [:]
    private var heldSerial: UInt64 = 0

    private struct NameOn: Hashable {
        var interface: String
        var name: DNSName
    }
    private let sender: any AnnouncementTransport
    private let origin = ContinuousClock.now

    init(pacing: AnnouncementPacing, sender: any AnnouncementTransport = MulticastSender()) {
        queue = AnnouncementQueue(pacing: pacing)
        self.sender = sender
    }

    var pacing: AnnouncementPacing {
        get { queue.pacing }
        set { queue.pacing = newValue }
    }

    /// The announcer's clock (its queue's and the answerer's time).
    var now: Duration { ContinuousClock.now - origin }

    /// RFC 6762 §2: PTRs are shared, the rest is unique (§8.1) and sent with the cache-flush bit.
    static func isUnique(_ record: MDNSRecord) -> Bool { record.type != .ptr }

    private struct RRSetKey: Hashable {
        var name: DNSName
        var type: RRType

        init(_ record: MDNSRecord) {
            name = record.name
            type = record.type
        }
    }

    /// avahi holds `records` for `key` now: announces what its clients were not told, the
    /// whole RRset of a unique record that changed (the cache-flush bit makes receivers drop
    /// the members they were not sent, §10.2), and says goodbye to what is gone.
    func established(_ key: MDNSGroup.Key, records: [MDNSRecord]) {
        let before = told[key] ?? []
        let current = Set(records)
        let changed = Set(
            (records.filter { !before.contains($0) } + before.filter { !current.contains($0) })
                .filter(Self.isUnique).map(RRSetKey.init))
        let remaining = Set(records.filter(Self.isUnique).map(RRSetKey.init))
        tell(key, records)
        goodbye(before.filter { !current.contains($0) && !remaining.contains(RRSetKey($0)) }, key: key)
        let new = records.filter { !before.contains($0) || changed.contains(RRSetKey($0)) }
        queue.announce(new.map(Self.outgoing), on: key.interface, now: now)
    }

    /// avahi no longer holds `key`'s records (the group was freed): goodbye to them.
    func withdrawn(_ key: MDNSGroup.Key) {
        goodbye(tell(key, nil) ?? [], key: key)
    }

    /// Another host owns the name now: goodbye to our data under it, not to the shared PTRs,
    /// which are the owner's too (its instance has the same name).
    func collided(_ key: MDNSGroup.Key) {
        goodbye((tell(key, nil) ?? []).filter(Self.isUnique), key: key)
    }

    /// The groups told.
    var keys: [MDNSGroup.Key] { Array(told.keys) }

    /// What `key`'s clients were told, nil if nothing.
    func records(of key: MDNSGroup.Key) -> [MDNSRecord]? { told[key] }

    /// The records held on `interface` under `name`, of every type.
    func held(_ name: DNSName, on interface: String) -> [MDNSRecord] {
        (byName[NameOn(interface: interface, name: name)] ?? [:]).sorted { $0.value < $1.value }.map(\.key)
    }

    /// The groups on `interface` whose records include `name` with `type`.
    func groups(holding name: DNSName, _ type: RRType, on interface: String) -> [MDNSGroup.Key] {
        told.filter { $0.key.interface == interface && $0.value.contains { $0.type == type && $0.name == name } }
            .keys.sorted()
    }

    /// Announces `records`, held on `interface`, again: another host said goodbye to them
    /// (RFC 6762 §10.1), and its receivers dropped them.
    func announceAgain(_ records: [MDNSRecord], on interface: String) {
        let held = records.filter { holders[Holding(interface: interface, record: $0)] != nil }
        queue.announce(held.map(Self.outgoing), on: interface, now: now)
    }

    /// Announces every group again (a link came back: RFC 6762 §8.3 "on a Link Change").
    func reannounce() {
        for (key, records) in told.sorted(by: { $0.key < $1.key }) {
            queue.announce(records.map(Self.outgoing), on: key.interface, now: now)
        }
    }

    /// Goodbyes for everything, sent at once.
    func shutdown() -> [(interface: String, error: String)] {
        for (key, records) in told.sorted(by: { $0.key < $1.key }) {
            tell(key, nil)
            goodbye(records, key: key)
        }
        return send(ignoringPacing: true).errors
    }

    /// Sends what is due; returns what failed and when the next is due.
    func send(ignoringPacing: Bool = false) -> (errors: [(interface: String, error: String)], next: Duration?) {
        var errors: [(interface: String, error: String)] = []
        for interface in queue.interfaces {
            // Sent as soon as made, each interface at its own time (`AnnouncementQueue.due(on:)`).
            for packet in queue.due(on: interface, now: now, ignoringPacing: ignoringPacing) {
                if let error = sender.send(packet, on: interface) { errors.append((interface, error)) }
            }
        }
        let now = self.now
        return (errors, queue.nextDue.map { max(.zero, $0 - now) })
    }

    static func outgoing(_ record: MDNSRecord) -> AnnouncementQueue.Outgoing {
        .init(record: record, unique: isUnique(record), ttl: MDNSRecord.defaultTTL(for: record.type))
    }

    /// Goodbyes for `records` of `key`, except those another group on the interface still
    /// holds (the type enumeration PTR every instance of a type carries). `key`'s own told
    /// records are never among `records` (callers update `told` first).
    private func goodbye(_ records: [MDNSRecord], key: MDNSGroup.Key) {
        let gone = records.filter { holders[Holding(interface: key.interface, record: $0)] == nil }
        guard !gone.isEmpty else { return }
        queue.goodbye(gone.map { .init(record: $0, unique: Self.isUnique($0), ttl: 0) }, on: key.interface, now: now)
    }

    /// Sets what `key`'s clients were told (nil: nothing), and `holders` with it; returns
    /// what it was.
    @discardableResult
    private func tell(_ key: MDNSGroup.Key, _ records: [MDNSRecord]?) -> [MDNSRecord]? {
        let old = if let records { told.updateValue(records, forKey: key) } else { told.removeValue(forKey: key) }
        guard old != records else { return old }
        for record in Set(old ?? []) { release(Holding(interface: key.interface, record: record)) }
        for record in Set(records ?? []) {
            let holding = Holding(interface: key.interface, record: record)
            holders[holding, default: 0] += 1
            if holders[holding] == 1 {
                heldSerial &+= 1
                byName[NameOn(interface: key.interface, name: record.name), default: [:]][record] = heldSerial
            }
        }
        return old
    }

    private func release(_ holding: Holding) {
        guard let count = holders[holding] else { return }
        holders[holding] = count > 1 ? count - 1 : nil
        guard count == 1 else { return }
        let name = NameOn(interface: holding.interface, name: holding.record.name)
        byName[name]?[holding.record] = nil
        if byName[name]?.isEmpty == true { byName[name] = nil }
    }
}
