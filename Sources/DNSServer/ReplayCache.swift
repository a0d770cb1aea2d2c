import DNSWire
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Answers the responder allowed to be replayed (`DNSAnswerReplay`), kept per event loop so
/// that a repeated query is answered without a lock, a responder call or an allocation: hash
/// the query bytes after the ID, compare, check the responder's epoch (one atomic load), copy
/// the stored answer and patch in the new ID.
///
/// Confined to one event loop; not thread-safe. A set-associative table: a query's hash picks
/// a set of `ways` slots, and a full set gives up the entry that expires first. So a lookup
/// reads at most four slots whatever the load, and no sequence of queries can make it slower
/// (the hash is `Hasher`'s, seeded per process). Bounded: at `capacity` entries the table is
/// emptied (after reporting its replay counts).
final class ReplayCache {
    /// Who asked: the address without the port (stub resolvers pick a new port per query).
    enum ClientKey: Hashable {
        case v4(UInt32)
        case v6(UInt64, UInt64)
        case other

        init(_ address: SocketAddress?) {
            switch address {
            // The raw sockaddr layouts, as in `DNSClient.init(_:transport:)`: the IPv4 address
            // at offset 4 of sockaddr_in, the IPv6 address at offset 8 of sockaddr_in6.
            case .v4(let v4)?:
                self = .v4(withUnsafeBytes(of: v4.address) { $0.loadUnaligned(fromByteOffset: 4, as: UInt32.self) })
            case .v6(let v6)?:
                let words = withUnsafeBytes(of: v6.address) {
                    (
                        $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                        $0.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
                    )
                }
                self = .v6(words.0, words.1)
            default:
                self = .other
            }
        }
    }

    /// One stored answer. Its query (without the ID) and answer share one buffer, so that a
    /// lookup touches two allocations: the entry and its bytes.
    private final class Entry {
        let hash: Int
        let client: ClientKey
        let transport: DNSTransport
        /// The query without its ID, then the answer as encoded (with the first query's ID).
        let bytes: ByteBuffer
        let queryLength: Int
        let replay: DNSAnswerReplay
        let expires: NIODeadline
        /// Replays not yet reported to the responder.
        var unreported = 0

        init(
            hash: Int, client: ClientKey, transport: DNSTransport, query: UnsafeRawBufferPointer, answer: ByteBuffer,
            replay: DNSAnswerReplay, expires: NIODeadline
        ) {
            var bytes = ByteBuffer()
            bytes.reserveCapacity(query.count + answer.readableBytes)
            bytes.writeBytes(query)
            bytes.writeImmutableBuffer(answer)
            self.hash = hash
            self.client = client
            self.transport = transport
            self.bytes = bytes
            self.queryLength = query.count
            self.replay = replay
            self.expires = expires
        }

        /// Calls `body` with the answer if `query` (without its ID) is this entry's: same
        /// client and transport, same bytes (memcmp, not the generic `elementsEqual`: this
        /// runs for every replayed query).
        func withAnswer<R>(
            ifMatching query: UnsafeRawBufferPointer, client: ClientKey, transport: DNSTransport,
            _ body: (UnsafeRawBufferPointer) -> R
        ) -> R? {
            guard self.queryLength == query.count, self.client == client, self.transport == transport else {
                return nil
            }
            return self.bytes.withUnsafeReadableBytes { stored in
                guard query.count == 0 || memcmp(stored.baseAddress!, query.baseAddress!, query.count) == 0 else {
                    return nil
                }
                return body(UnsafeRawBufferPointer(rebasing: stored[query.count...]))
            }
        }

        /// Whether `other` was stored for the same query as this entry.
        func isSameQuery(as other: Entry) -> Bool {
            self.bytes.withUnsafeReadableBytes { bytes in
                other.withAnswer(
                    ifMatching: UnsafeRawBufferPointer(rebasing: bytes.prefix(self.queryLength)), client: self.client,
                    transport: self.transport
                ) { _ in () } != nil
            }
        }
    }

    static let ways = 4
    /// `sets * ways` slots; a set is `ways` adjacent slots.
    private var slots: [Entry?]
    private var setMask: Int
    private let maxSets: Int
    private let capacity: Int
    private(set) var count = 0
    /// `replay-answers`, shared by the server's caches and changed by a reload: off, nothing
    /// is replayed or stored, and the next sweep empties the table.
    let isOn: ReplaySwitch

    /// At most `capacity` entries, in twice as many slots (rounded up to a power of two). The
    /// table starts small and doubles while more than a quarter full: at that load a set of
    /// four overflows for under 0.5% of entries (Poisson, mean one per set), at half load for 5%.
    init(capacity: Int = 8192, isOn: ReplaySwitch = ReplaySwitch(true)) {
        self.isOn = isOn
        let maxSets = max(1, (2 * capacity + Self.ways - 1) / Self.ways)
        self.maxSets = 1 << (Int.bitWidth - (maxSets - 1).leadingZeroBitCount)
        self.capacity = capacity
        let sets = min(self.maxSets, 64)
        self.slots = Array(repeating: nil, count: sets * Self.ways)
        self.setMask = sets - 1
    }

    /// The stored answer for `query` with its ID, or nil (not stored, expired, or no longer
    /// current). `query` is the whole message, ID included. Counts a replay.
    func answer(
        to query: UnsafeRawBufferPointer, client: ClientKey, transport: DNSTransport, now: NIODeadline
    ) -> ByteBuffer? {
        self.withAnswer(to: query, client: client, transport: transport, now: now) { stored in
            var answer = ByteBuffer()
            answer.reserveCapacity(stored.count)
            answer.writeBytes(query[0..<2])
            answer.writeBytes(UnsafeRawBufferPointer(rebasing: stored[2...]))
            return answer
        }
    }

    /// Calls `body` with the stored answer for `query` as stored (its ID is the one of the
    /// query that made it; the caller copies it and patches the ID). Nil when there is none to
    /// replay. Counts a replay.
    func withAnswer<R>(
        to query: UnsafeRawBufferPointer, client: ClientKey, transport: DNSTransport, now: NIODeadline,
        _ body: (UnsafeRawBufferPointer) -> R
    ) -> R? {
        guard query.count > 12, self.isOn.value else { return nil }
        let question = UnsafeRawBufferPointer(rebasing: query[2...])
        let hash = Self.hash(question, client: client, transport: transport)
        let first = (hash & self.setMask) &* Self.ways
        for slot in first..<(first + Self.ways) {
            guard let entry = self.slots[slot], entry.hash == hash else { continue }
            guard now < entry.expires, entry.replay.isCurrent() else {
                // Expired or stale: asked of the responder again, whatever the bytes.
                self.retire(at: slot)
                return nil
            }
            guard let result = entry.withAnswer(ifMatching: question, client: client, transport: transport, body)
            else { continue }
            entry.unreported += 1
            return result
        }
        return nil
    }

    /// Stores an answer the responder allowed to be replayed.
    func remember(
        _ answer: ByteBuffer, replay: DNSAnswerReplay, query: UnsafeRawBufferPointer, client: ClientKey,
        transport: DNSTransport, now: NIODeadline
    ) {
        guard query.count > 12, answer.readableBytes >= 12, self.isOn.value else { return }
        let question = UnsafeRawBufferPointer(rebasing: query[2...])
        let hash = Self.hash(question, client: client, transport: transport)
        let entry = Entry(
            hash: hash, client: client, transport: transport, query: question, answer: answer, replay: replay,
            expires: now + Self.spread(replay.lifetime))
        if self.count >= self.capacity {
            // Full (many clients): start over rather than search for the entry to give up.
            // Costs one responder call per live query.
            self.reportAll()
            self.slots = Array(repeating: nil, count: self.slots.count)
            self.count = 0
        } else if 4 * (self.count + 1) > self.slots.count, self.setMask + 1 < self.maxSets {
            self.grow()
        }
        self.place(entry)
    }

    /// A lifetime cut to a random 50–100% of itself. Entries made together (a client warming
    /// up, or every entry after one record change) would otherwise all expire in the same
    /// instant, and the loop would rebuild them all through the responder at once while the
    /// queries behind them wait: the latency tail.
    static func spread(_ lifetime: Duration) -> TimeAmount {
        let nanoseconds = TimeAmount(lifetime).nanoseconds
        return .nanoseconds(nanoseconds / 2 + Int64.random(in: 0...max(0, nanoseconds / 2)))
    }

    /// Reports pending replay counts and drops expired entries; run about once a second.
    func sweep(now: NIODeadline) {
        let on = self.isOn.value
        for slot in self.slots.indices {
            guard let entry = self.slots[slot] else { continue }
            if now >= entry.expires || !on {
                self.retire(at: slot)
            } else if entry.unreported > 0 {
                entry.replay.replayed(entry.unreported)
                entry.unreported = 0
            }
        }
    }

    /// Reports everything still pending (at shutdown).
    func reportAll() {
        for case let entry? in self.slots where entry.unreported > 0 {
            entry.replay.replayed(entry.unreported)
            entry.unreported = 0
        }
    }

    /// Puts `entry` in its set: in place of an entry for the same query, else in a free slot,
    /// else in place of the entry that expires first.
    private func place(_ entry: Entry) {
        let first = (entry.hash & self.setMask) &* Self.ways
        var victim = first
        for slot in first..<(first + Self.ways) {
            guard let other = self.slots[slot] else {
                victim = slot
                break
            }
            if other.hash == entry.hash, entry.isSameQuery(as: other) {
                victim = slot
                break
            }
            if let current = self.slots[victim], other.expires < current.expires {
                victim = slot
            }
        }
        self.retire(at: victim)
        self.slots[victim] = entry
        self.count += 1
    }

    private func grow() {
        let old = self.slots
        let sets = 2 * (self.setMask + 1)
        self.slots = Array(repeating: nil, count: sets * Self.ways)
        self.setMask = sets - 1
        self.count = 0
        for case let entry? in old {
            self.place(entry)
        }
    }

    private func retire(at slot: Int) {
        guard let entry = self.slots[slot] else { return }
        self.slots[slot] = nil
        self.count -= 1
        if entry.unreported > 0 { entry.replay.replayed(entry.unreported) }
    }

    private static func hash(_ question: UnsafeRawBufferPointer, client: ClientKey, transport: DNSTransport) -> Int {
        var hasher = Hasher()
        hasher.combine(client)
        hasher.combine(transport)
        hasher.combine(bytes: question)
        return hasher.finalize()
    }
}

/// One `ReplayCache` per event loop of a server, shared by its UDP and TCP handlers on that
/// loop, with a once-a-second sweep that reports replay counts.
final class ReplayCaches: Sendable {
    let isOn: ReplaySwitch
    private let caches: [ObjectIdentifier: (loop: any EventLoop, cache: NIOLoopBoundBox<ReplayCache>)]
    private let sweeps: [RepeatedTask]

    /// One cache per loop of `group`; none (replay off) for groups that cannot list their loops.
    init(group: any EventLoopGroup, on: Bool) {
        let isOn = ReplaySwitch(on)
        self.isOn = isOn
        var caches: [ObjectIdentifier: (loop: any EventLoop, cache: NIOLoopBoundBox<ReplayCache>)] = [:]
        var sweeps: [RepeatedTask] = []
        for loop in group.makeIterator() {
            // Built here, off the loop, and only ever used on it.
            let bound = NIOLoopBoundBox.makeBoxSendingValue(ReplayCache(isOn: isOn), eventLoop: loop)
            caches[ObjectIdentifier(loop)] = (loop, bound)
            sweeps.append(
                loop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(1)) { _ in
                    bound.value.sweep(now: .now())
                })
        }
        self.caches = caches
        self.sweeps = sweeps
    }

    /// The cache of `loop`; call on that loop only.
    func cache(for loop: any EventLoop) -> ReplayCache? {
        self.caches[ObjectIdentifier(loop)]?.cache.value
    }

    /// Stops the sweeps and reports what is pending.
    func stop() {
        for task in self.sweeps { task.cancel() }
        for (loop, bound) in self.caches.values {
            loop.execute { bound.value.reportAll() }
        }
    }
}

/// Whether answers are replayed (`replay-answers`): read once per query (one relaxed atomic
/// load), set by a reload.
final class ReplaySwitch: Sendable {
    private let on: Atomic<Bool>
    init(_ on: Bool) { self.on = Atomic(on) }
    var value: Bool { on.load(ordering: .relaxed) }
    func set(_ value: Bool) { on.store(value, ordering: .relaxed) }
}
