import DNSWire
import Synchronization

/// An `MDNSBackend` that adds to another backend's answers the records this host publishes on
/// a link with its own responder: the SRP registrar's (`LinkResponder`). That responder's
/// multicast loopback is off, so the router's avahi-daemon never hears these records, and the
/// proxy's browses of the link would not find what devices registered there. Each query
/// started here gets the records held under its name and type, then their changes,
/// interleaved with the other backend's events.
///
/// Two locks. `deliveries` is held while receivers are called: the other backend's events
/// (relayed), the changes `update` makes and the held records a new query gets, so that each
/// query's events stay serial. `shared.state` is held only for bookkeeping, never while a
/// receiver runs: a receiver may start a query (the proxy's inventory does, answering a
/// browse of `_services._dns-sd._udp`), and `startQuery` takes `state` alone.
///
/// After `.failed`, `.verifying` or `.restarted` the held records are delivered again (the
/// holders drop or recount what they had then). The records already held when a query starts
/// are delivered through `later`, off the caller's thread: the caller may hold a lock its
/// receiver takes (a DNS Push session subscribing), and its answer must go out before those
/// events. Until then the query gets no change of them either (each record once). So
/// receivers run on the other backend's thread, on the thread that calls `update`, and on
/// `later`'s.
///
/// A query's entry costs a dictionary slot and is swept once cancelled; `cancel()` takes no
/// lock, as the proxy cancels queries holding its own.
public final class LocalRecordsBackend: MDNSBackend {
    private let inner: any MDNSBackend
    private let shared = Shared()
    private let relay: Relay
    private let cancelled = CancelCount()
    private let later: @Sendable (@escaping @Sendable () -> Void) -> Void

    struct State {
        var queries: [UInt32: Query] = [:]
        var byName: [NameOn: [UInt32]] = [:]
        /// The records held under each name, by interface, with how many groups hold each.
        var held: [NameOn: [MDNSRecord: Int]] = [:]
        var groups: [MDNSGroup.Key: [MDNSRecord]] = [:]
        var nextID: UInt32 = 0
        /// Queries whose held records are still to be delivered (`later`): no event of those
        /// records reaches them before.
        var unprimed: Set<UInt32> = []
    }

    struct NameOn: Hashable {
        var interface: String
        var name: DNSName
    }

    /// One query started here: the other backend's events carry its `id` as their tag.
    final class Query: Sendable {
        let question: MDNSQuestion
        let tag: UInt32
        weak let receiver: (any MDNSQueryReceiver)?
        let isCancelled = Atomic<Bool>(false)

        init(question: MDNSQuestion, tag: UInt32, receiver: any MDNSQueryReceiver) {
            self.question = question
            self.tag = tag
            self.receiver = receiver
        }

        /// Hands `event` to the receiver, unless cancelled or gone.
        func deliver(_ event: MDNSEvent) {
            guard !isCancelled.load(ordering: .acquiring), let receiver else { return }
            receiver.receive(event, for: question, tag: tag)
        }

        func wants(_ record: MDNSRecord) -> Bool { question.type == .any || question.type == record.type }
    }

    /// What a change makes known: each event to its query.
    private typealias Deliveries = [(query: Query, event: MDNSEvent)]

    /// `later` runs its work soon on another thread (the proxy's scheduler).
    public init(wrapping inner: any MDNSBackend, later: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void) {
        self.inner = inner
        self.later = later
        self.relay = Relay(shared: shared)
    }

    public var state: MDNSBackendState { inner.state }

    public func reconfirm(_ question: MDNSQuestion, record: MDNSRecord) {
        // Our own records are as they are; the other backend verifies the rest.
        let on = NameOn(interface: question.interface, name: record.name)
        let isHeld = shared.state.withLock { $0.held[on]?[record] != nil }
        if !isHeld { inner.reconfirm(question, record: record) }
    }

    public func startQuery(
        _ question: MDNSQuestion, tag: UInt32, receiver: any MDNSQueryReceiver
    ) throws(MDNSError) -> any MDNSQueryHandle {
        let query = Query(question: question, tag: tag, receiver: receiver)
        let on = NameOn(interface: question.interface, name: question.name)
        let (id, prime) = shared.state.withLock { state in
            sweep(&state)
            state.nextID &+= 1
            while state.queries[state.nextID] != nil { state.nextID &+= 1 }
            state.queries[state.nextID] = query
            state.byName[on, default: []].append(state.nextID)
            let held = Self.records(on, of: state).contains(where: query.wants)
            if held { state.unprimed.insert(state.nextID) }
            return (state.nextID, held)
        }
        let handle: any MDNSQueryHandle
        do {
            handle = try inner.startQuery(question, tag: id, receiver: relay)
        } catch {
            query.isCancelled.store(true, ordering: .releasing)
            cancelled.add()
            throw error
        }
        if prime { later { [shared] in shared.prime(id) } }
        return Handle(query: query, inner: handle, cancelled: cancelled)
    }

    /// Publishes `changed` (each replacing the group of its key) and withdraws `removed`: the
    /// live queries for their names get the records that came and went.
    public func update(changed: [MDNSGroup], removed: [MDNSGroup.Key]) {
        change { state, deliveries in
            for group in changed {
                Self.set(group.key, group.records.isEmpty ? nil : group.records, in: &state, into: &deliveries)
            }
            for key in removed { Self.set(key, nil, in: &state, into: &deliveries) }
        }
    }

    /// Makes `groups` all that is published.
    public func replaceAll(_ groups: [MDNSGroup]) {
        change { state, deliveries in
            let wanted = Set(groups.map(\.key))
            for key in state.groups.keys where !wanted.contains(key) {
                Self.set(key, nil, in: &state, into: &deliveries)
            }
            for group in groups {
                Self.set(group.key, group.records.isEmpty ? nil : group.records, in: &state, into: &deliveries)
            }
        }
    }

    /// Makes a change under the state's lock, then hands its events out under the deliveries'.
    private func change(_ body: (inout State, inout Deliveries) -> Void) {
        shared.deliveries.withLock { _ in
            let deliveries = shared.state.withLock { state in
                var deliveries: Deliveries = []
                body(&state, &deliveries)
                return deliveries
            }
            for (query, event) in deliveries { query.deliver(event) }
        }
    }

    /// How many records are held, on every interface.
    public var heldCount: Int { shared.state.withLock { $0.held.values.reduce(0) { $0 + $1.count } } }

    /// How many queries have an entry (cancelled ones until they are swept).
    public var queryCount: Int { shared.state.withLock { $0.queries.count } }

    private static func set(
        _ key: MDNSGroup.Key, _ records: [MDNSRecord]?, in state: inout State, into deliveries: inout Deliveries
    ) {
        let old = state.groups[key] ?? []
        guard old != records ?? [] else { return }
        state.groups[key] = records
        let new = Set(records ?? [])
        let before = Set(old)
        for record in before where !new.contains(record) {
            let on = NameOn(interface: key.interface, name: record.name)
            guard let count = state.held[on]?[record] else { continue }
            if count > 1 {
                state.held[on]?[record] = count - 1
                continue
            }
            state.held[on]?[record] = nil
            if state.held[on]?.isEmpty == true { state.held[on] = nil }
            add(.removed(record), of: record, to: on, in: state, into: &deliveries)
        }
        for record in new where !before.contains(record) {
            let on = NameOn(interface: key.interface, name: record.name)
            state.held[on, default: [:]][record, default: 0] += 1
            if state.held[on]?[record] == 1 { add(.added(record), of: record, to: on, in: state, into: &deliveries) }
        }
    }

    /// `event`, for `record`, to the live queries for its name.
    private static func add(
        _ event: MDNSEvent, of record: MDNSRecord, to on: NameOn, in state: State, into deliveries: inout Deliveries
    ) {
        for id in state.byName[on] ?? [] where !state.unprimed.contains(id) {
            if let query = state.queries[id], query.wants(record) { deliveries.append((query, event)) }
        }
    }

    /// The records held under `on`, in a fixed order.
    fileprivate static func records(_ on: NameOn, of state: State) -> [MDNSRecord] {
        (state.held[on] ?? [:]).keys.sorted { a, b in
            a.type != b.type ? a.type.rawValue < b.type.rawValue : a.rdata.lexicographicallyPrecedes(b.rdata)
        }
    }

    /// Drops cancelled queries once they are many (a query's cancel takes no lock).
    private func sweep(_ state: inout State) {
        let count = cancelled.value
        guard count > 64 && count * 2 > state.queries.count else { return }
        cancelled.reset()
        let gone = state.queries.filter { $0.value.isCancelled.load(ordering: .acquiring) || $0.value.receiver == nil }
        for (id, query) in gone {
            state.queries[id] = nil
            state.unprimed.remove(id)
            let on = NameOn(interface: query.question.interface, name: query.question.name)
            state.byName[on]?.removeAll { $0 == id }
            if state.byName[on]?.isEmpty == true { state.byName[on] = nil }
        }
    }

    /// The state, and the lock every query's events go out under.
    final class Shared: Sendable {
        let state = Mutex(State())
        let deliveries = Mutex(())

        /// Delivers what query `id` did not get at its start.
        func prime(_ id: UInt32) {
            deliveries.withLock { _ in
                let (query, records) = state.withLock { state -> (Query?, [MDNSRecord]) in
                    guard state.unprimed.remove(id) != nil, let query = state.queries[id] else { return (nil, []) }
                    let on = NameOn(interface: query.question.interface, name: query.question.name)
                    return (query, LocalRecordsBackend.records(on, of: state).filter(query.wants))
                }
                for record in records { query?.deliver(.added(record)) }
            }
        }

        /// The other backend's event for query `id`; after one that drops what its holders had,
        /// the held records again (not before the query is primed: `prime` delivers them).
        func relayed(_ event: MDNSEvent, id: UInt32) {
            deliveries.withLock { _ in
                let (query, again) = state.withLock { state -> (Query?, [MDNSRecord]) in
                    guard let query = state.queries[id] else { return (nil, []) }
                    switch event {
                    case .failed, .verifying, .restarted:
                        guard !state.unprimed.contains(id) else { return (query, []) }
                        let on = NameOn(interface: query.question.interface, name: query.question.name)
                        return (query, LocalRecordsBackend.records(on, of: state).filter(query.wants))
                    case .added, .removed, .allForNow:
                        return (query, [])
                    }
                }
                guard let query else { return }
                query.deliver(event)
                for record in again { query.deliver(.added(record)) }
            }
        }
    }

    /// Takes the other backend's events (one receiver for every query: no closure a query).
    private final class Relay: MDNSQueryReceiver {
        let shared: Shared
        init(shared: Shared) { self.shared = shared }
        func receive(_ event: MDNSEvent, for question: MDNSQuestion, tag: UInt32) {
            shared.relayed(event, id: tag)
        }
    }

    private final class CancelCount: Sendable {
        private let count = Atomic<Int>(0)
        var value: Int { count.load(ordering: .relaxed) }
        func add() { count.add(1, ordering: .relaxed) }
        func reset() { count.store(0, ordering: .relaxed) }
    }

    private final class Handle: MDNSQueryHandle {
        let query: Query
        let inner: any MDNSQueryHandle
        let cancelled: CancelCount

        init(query: Query, inner: any MDNSQueryHandle, cancelled: CancelCount) {
            self.query = query
            self.inner = inner
            self.cancelled = cancelled
        }

        func cancel() {
            guard !query.isCancelled.exchange(true, ordering: .acquiringAndReleasing) else { return }
            cancelled.add()
            inner.cancel()
        }
    }
}
