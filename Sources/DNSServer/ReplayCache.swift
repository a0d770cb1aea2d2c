import NIOCore

/// Answers the responder allowed to be replayed (`DNSAnswerReplay`), kept per event loop so
/// that a repeated query is answered without a lock, a responder call or an allocation beyond
/// the reply buffer: hash the query bytes after the ID, compare, check the responder's epoch
/// (one atomic load), copy the stored answer and patch in the new ID.
///
/// Confined to one event loop; not thread-safe. Bounded: when full, the whole cache is dropped
/// (after reporting its replay counts), which costs one responder call per live query.
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
                    ($0.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                     $0.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
                }
                self = .v6(words.0, words.1)
            default:
                self = .other
            }
        }
    }

    /// A class, so that a lookup retains one object rather than each field.
    private final class Entry {
        let client: ClientKey
        let transport: DNSTransport
        /// The query without its ID.
        let query: [UInt8]
        let answer: ByteBuffer
        let replay: DNSAnswerReplay
        let expires: NIODeadline
        /// Replays not yet reported to the responder.
        var unreported = 0

        init(
            client: ClientKey, transport: DNSTransport, query: [UInt8], answer: ByteBuffer, replay: DNSAnswerReplay,
            expires: NIODeadline
        ) {
            self.client = client
            self.transport = transport
            self.query = query
            self.answer = answer
            self.replay = replay
            self.expires = expires
        }
    }

    private var entries: [Int: Entry] = [:]
    private let capacity: Int

    init(capacity: Int = 8192) {
        self.capacity = capacity
    }

    /// The stored answer for `query` with its ID, or nil (not stored, expired, or no longer
    /// current). `query` is the whole message, ID included.
    func answer(
        to query: UnsafeRawBufferPointer, client: ClientKey, transport: DNSTransport, now: NIODeadline
    ) -> ByteBuffer? {
        guard query.count > 12 else { return nil }
        let key = Self.hash(query, client: client, transport: transport)
        guard let entry = self.entries[key] else { return nil }
        guard entry.client == client, entry.transport == transport,
            entry.query.elementsEqual(UnsafeRawBufferPointer(rebasing: query[2...]))
        else { return nil }
        guard now < entry.expires, entry.replay.isCurrent() else {
            self.retire(key)
            return nil
        }
        entry.unreported += 1
        var answer = entry.answer
        answer.setBytes(query[0..<2], at: answer.readerIndex)
        return answer
    }

    /// Stores an answer the responder allowed to be replayed.
    func remember(
        _ answer: ByteBuffer, replay: DNSAnswerReplay, query: UnsafeRawBufferPointer, client: ClientKey,
        transport: DNSTransport, now: NIODeadline
    ) {
        guard query.count > 12, answer.readableBytes >= 12 else { return }
        let key = Self.hash(query, client: client, transport: transport)
        if self.entries[key] != nil {
            self.retire(key)
        } else if self.entries.count >= self.capacity {
            self.reportAll()
            self.entries.removeAll(keepingCapacity: true)
        }
        self.entries[key] = Entry(
            client: client, transport: transport, query: Array(query[2...]), answer: answer, replay: replay,
            expires: now + Self.spread(replay.lifetime))
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
        for (key, entry) in self.entries {
            if now >= entry.expires {
                self.retire(key)
            } else if entry.unreported > 0 {
                entry.replay.replayed(entry.unreported)
                entry.unreported = 0
            }
        }
    }

    /// Reports everything still pending (at shutdown).
    func reportAll() {
        for entry in self.entries.values where entry.unreported > 0 {
            entry.replay.replayed(entry.unreported)
            entry.unreported = 0
        }
    }

    var count: Int { self.entries.count }

    private func retire(_ key: Int) {
        guard let entry = self.entries.removeValue(forKey: key) else { return }
        if entry.unreported > 0 { entry.replay.replayed(entry.unreported) }
    }

    private static func hash(_ query: UnsafeRawBufferPointer, client: ClientKey, transport: DNSTransport) -> Int {
        var hasher = Hasher()
        hasher.combine(client)
        hasher.combine(transport)
        hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: query[2...]))
        return hasher.finalize()
    }
}

/// One `ReplayCache` per event loop of a server, shared by its UDP and TCP handlers on that
/// loop, with a once-a-second sweep that reports replay counts.
final class ReplayCaches: Sendable {
    private let caches: [ObjectIdentifier: (loop: any EventLoop, cache: NIOLoopBoundBox<ReplayCache>)]
    private let sweeps: [RepeatedTask]

    /// One cache per loop of `group`; none (replay off) for groups that cannot list their loops.
    init(group: any EventLoopGroup) {
        var caches: [ObjectIdentifier: (loop: any EventLoop, cache: NIOLoopBoundBox<ReplayCache>)] = [:]
        var sweeps: [RepeatedTask] = []
        for loop in group.makeIterator() {
            // Built here, off the loop, and only ever used on it.
            let bound = NIOLoopBoundBox.makeBoxSendingValue(ReplayCache(), eventLoop: loop)
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
