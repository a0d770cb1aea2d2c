import CoreMetrics
import DNSWire
import EventCounting
import NIOCore
import Synchronization

// What stands between the listeners and whatever answers: the responder contract, the response
// rate limiter in front of it, and the front ends' counters.

/// What the network front ends hand queries to. The servers only move bytes: decoding,
/// answering and encoding (within the transport's size limit) are the responder's job.
public protocol DNSResponder: Sendable {
    /// Answers one query message (without the TCP length prefix). `answer` must be called
    /// exactly once, either before `handle` returns (a cache hit) or later from any thread
    /// (an mDNS miss): with the encoded answer, or with nil bytes to send nothing (for example
    /// a query too short to hold a DNS header). The answer may say that the front end can
    /// replay it (see `DNSAnswer.replay`).
    func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void)
}

/// A responder's answer: the message bytes (nil: send nothing) and, optionally, permission to
/// replay them.
public struct DNSAnswer: Sendable {
    public var bytes: [UInt8]?
    public var replay: DNSAnswerReplay?

    public init(bytes: [UInt8]?, replay: DNSAnswerReplay? = nil) {
        self.bytes = bytes
        self.replay = replay
    }
}

/// The responder's promise that, while `isCurrent()` holds, the same query bytes (apart from
/// the 2-byte ID) from the same client and transport get the same answer bytes (apart from
/// the ID). The front end then answers such queries itself, without calling the responder,
/// for at most `lifetime` before asking again, and reports how many it answered through
/// `replayed` (batched, at least once per `lifetime`).
public struct DNSAnswerReplay: Sendable {
    public var lifetime: Duration
    public var isCurrent: @Sendable () -> Bool
    public var replayed: @Sendable (_ count: Int) -> Void

    public init(
        lifetime: Duration, isCurrent: @escaping @Sendable () -> Bool,
        replayed: @escaping @Sendable (_ count: Int) -> Void
    ) {
        self.lifetime = lifetime
        self.isCurrent = isCurrent
        self.replayed = replayed
    }
}

extension DNSClient {
    /// The client behind `address`: 4 address bytes for IPv4 and IPv4-mapped IPv6, 16 for IPv6;
    /// no bytes and port 0 for other or unknown addresses.
    init(_ address: SocketAddress?, transport: DNSTransport) {
        // Raw sockaddr layouts: sockaddr_in has the address at offset 4, sockaddr_in6 at offset 8
        // (after family/len, port and flow info), both in network byte order.
        switch address {
        case .v4(let v4)?:
            let bytes = withUnsafeBytes(of: v4.address) { Array($0[4..<8]) }
            self.init(address: bytes, port: address?.port ?? 0, transport: transport)
        case .v6(let v6)?:
            var bytes = withUnsafeBytes(of: v6.address) { Array($0[8..<24]) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                bytes = Array(bytes[12..<16])
            }
            self.init(address: bytes, port: address?.port ?? 0, transport: transport)
        default:
            self.init(address: [], port: 0, transport: transport)
        }
    }
}

// MARK: - Response rate limiting

/// Response rate limiting for UDP (off by default): a token bucket per client prefix, so that
/// a spoofed-source flood cannot turn the server into an amplifier towards one network.
/// Like BIND's RRL, every `slip`-th limited answer is still sent, as a tiny TC=1 reply: a real
/// client behind the prefix retries over TCP (RFC 7766 §5), which a spoofed source cannot.
public struct ResponseRateLimit: Sendable, Equatable {
    /// Answers per second per prefix; 0 turns the limiter off.
    public var responsesPerSecond: Int = 0
    /// Answers a prefix may get at once before the rate applies; 0 means `responsesPerSecond`.
    public var burst: Int = 0
    /// Clients are grouped by these prefixes (a /24 is one site's IPv4 subnet, a /56 one
    /// customer's IPv6 allocation).
    public var ipv4PrefixLength = 24
    public var ipv6PrefixLength = 56
    /// Every `slip`-th limited answer goes out truncated (TC=1); 0 drops every limited answer.
    public var slip = 2
    /// Prefixes tracked at once; beyond it, full buckets (idle prefixes) are forgotten first.
    public var maxTrackedPrefixes = 65536

    public init() {}

    public var isEnabled: Bool { responsesPerSecond > 0 }
}

/// What to do with one answer to a UDP client.
public enum RateLimitDecision: Sendable, Equatable {
    case send
    /// Send a truncated reply instead (header and question, TC=1).
    case slip
    case drop
}

/// The per-prefix token buckets. Thread-safe; the time is passed in, as the time since the
/// limiter's user started (the same kind of clock as the proxy's mDNS token buckets), so that
/// tests can drive it.
public final class ResponseRateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: Duration
        var limitedCount = 0
    }

    private struct State {
        var limit: ResponseRateLimit
        var buckets: [[UInt8]: Bucket] = [:]
    }

    private let state: Mutex<State>
    /// `limit.isEnabled`, read per answer without the lock.
    private let enabled: Atomic<Bool>

    public init(_ limit: ResponseRateLimit) {
        self.state = Mutex(State(limit: limit))
        self.enabled = Atomic(limit.isEnabled)
    }

    /// The limit in force.
    public var limit: ResponseRateLimit { state.withLock { $0.limit } }

    /// False when the limit is off: every answer is sent, no lock taken.
    public var isEnabled: Bool { enabled.load(ordering: .relaxed) }

    /// A reload's new limit, at once. Buckets are kept while the prefixes that key them are
    /// the same (their tokens capped to the new burst), and start full otherwise.
    public func apply(_ limit: ResponseRateLimit) {
        state.withLock { state in
            let old = state.limit
            state.limit = limit
            if old.ipv4PrefixLength != limit.ipv4PrefixLength || old.ipv6PrefixLength != limit.ipv6PrefixLength
                || !limit.isEnabled
            {
                state.buckets.removeAll()
            } else {
                let capacity = Self.capacity(limit)
                for key in state.buckets.keys { state.buckets[key]!.tokens = min(capacity, state.buckets[key]!.tokens) }
            }
        }
        enabled.store(limit.isEnabled, ordering: .relaxed)
    }

    private static func capacity(_ limit: ResponseRateLimit) -> Double {
        Double(limit.burst > 0 ? limit.burst : limit.responsesPerSecond)
    }

    /// The client's prefix: its address with the host bits cleared (4 or 16 bytes in).
    public func prefix(of address: [UInt8]) -> [UInt8] {
        Self.prefix(of: address, limit: limit)
    }

    private static func prefix(of address: [UInt8], limit: ResponseRateLimit) -> [UInt8] {
        let length = address.count == 4 ? limit.ipv4PrefixLength : limit.ipv6PrefixLength
        var masked = address
        for index in masked.indices {
            let keep = min(8, max(0, length - index * 8))
            masked[index] &= keep == 8 ? 0xFF : ~UInt8(0xFF >> keep)
        }
        return masked
    }

    public func decide(client address: [UInt8], now: Duration) -> RateLimitDecision {
        guard isEnabled else { return .send }
        return state.withLock { state in
            let limit = state.limit
            guard limit.isEnabled else { return .send }
            let key = Self.prefix(of: address, limit: limit)
            let rate = Double(limit.responsesPerSecond)
            let capacity = Self.capacity(limit)
            var bucket = state.buckets[key] ?? Bucket(tokens: capacity, updated: now)
            bucket.tokens = min(capacity, bucket.tokens + max(0, (now - bucket.updated) / .seconds(1)) * rate)
            bucket.updated = now
            defer {
                if state.buckets[key] == nil, state.buckets.count >= limit.maxTrackedPrefixes {
                    Self.forgetIdle(&state, now: now, rate: rate, capacity: capacity)
                }
                state.buckets[key] = bucket
            }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return .send
            }
            bucket.limitedCount += 1
            if limit.slip > 0, bucket.limitedCount % limit.slip == 0 { return .slip }
            return .drop
        }
    }

    /// Prefixes tracked now.
    @_spi(Testing) public var trackedPrefixes: Int { state.withLock { $0.buckets.count } }

    /// Drops buckets that have refilled (they behave as new ones); if none has, the table is
    /// cleared rather than grown without bound (a flood from more prefixes than the table holds).
    private static func forgetIdle(_ state: inout State, now: Duration, rate: Double, capacity: Double) {
        state.buckets = state.buckets.filter {
            $0.value.tokens + (now - $0.value.updated) / .seconds(1) * rate < capacity
        }
        if state.buckets.count >= state.limit.maxTrackedPrefixes { state.buckets.removeAll() }
    }

    /// The truncated form of an answer for a slip: its header with TC set and the counts of
    /// the answer, authority and additional sections zeroed, and its question (the first name
    /// in a message is never compressed). Nil if the answer is too short to be a DNS message.
    public static func truncatedReply(to answer: [UInt8]) -> [UInt8]? {
        guard answer.count >= 12 else { return nil }
        var reply = Array(answer[0..<12])
        reply[2] |= 0x02  // TC
        for index in 6..<12 { reply[index] = 0 }
        let questions = Int(answer[4]) << 8 | Int(answer[5])
        guard questions == 1 else {
            reply[4] = 0
            reply[5] = 0
            return reply
        }
        var offset = 12
        while offset < answer.count, answer[offset] != 0 {
            guard answer[offset] & 0xC0 == 0 else {
                offset = answer.count
                break
            }
            offset += Int(answer[offset]) + 1
        }
        guard offset + 5 <= answer.count else {
            reply[4] = 0
            reply[5] = 0
            return reply
        }
        return reply + answer[12..<(offset + 5)]
    }
}

/// Wraps a responder with response rate limiting for UDP answers (`ResponseRateLimiter`).
/// TCP answers pass untouched: a TCP client has shown that its address is real.
public struct RateLimitedResponder: DNSResponder {
    public let inner: any DNSResponder
    public let limiter: ResponseRateLimiter
    private let clock = ContinuousClock()
    private let epoch = ContinuousClock.now
    private let counts = RateLimitCounts()

    public init(_ inner: any DNSResponder, limiter: ResponseRateLimiter) {
        self.inner = inner
        self.limiter = limiter
    }

    /// Answers dropped and answers sent truncated (slipped) so far.
    public var limited: Int { counts.limited.value }
    public var slipped: Int { counts.slipped.value }

    /// TCP answers (and all answers while the limit is off) keep the inner responder's replay
    /// permission; limited UDP answers never get one, so that every one passes the limiter.
    public func handle(query: [UInt8], from client: DNSClient, answer: @escaping @Sendable (DNSAnswer) -> Void) {
        guard client.transport == .udp, limiter.isEnabled else {
            inner.handle(query: query, from: client, answer: answer)
            return
        }
        let limiter = self.limiter
        let counts = self.counts
        let epoch = self.epoch
        let clock = self.clock
        inner.handle(query: query, from: client) { (inner: DNSAnswer) in
            guard let bytes = inner.bytes else { return answer(DNSAnswer(bytes: nil)) }
            switch limiter.decide(client: client.address, now: clock.now - epoch) {
            case .send:
                answer(DNSAnswer(bytes: bytes))
            case .slip:
                counts.slipped.increment()
                answer(DNSAnswer(bytes: ResponseRateLimiter.truncatedReply(to: bytes)))
            case .drop:
                counts.limited.increment()
                answer(DNSAnswer(bytes: nil))
            }
        }
    }
}

// MARK: - Counters

/// A snapshot of the front ends' counters (`DNSServer.stats()`).
public struct DNSServerStats: Sendable, Hashable {
    /// Queries handed to the responder.
    public var udpQueriesReceived = 0
    public var tcpQueriesReceived = 0
    /// Answers written.
    public var udpAnswersSent = 0
    public var tcpAnswersSent = 0
    /// Queries the responder answered with nil (nothing sent).
    public var queriesUnanswered = 0
    /// Oversized UDP datagrams, zero-length TCP messages, answers too large to frame.
    public var malformedDropped = 0
    /// UDP datagrams dropped because the server was shutting down.
    public var udpDroppedShuttingDown = 0

    /// DNS-over-TCP connections.
    public var tcp = TCPConnectionStats()

    public init() {}
}

/// DNS-over-TCP connection counters, as the status page and `/api` show them. `open` is a
/// level; the rest only grow.
public struct TCPConnectionStats: Sendable, Hashable, Codable {
    /// Connections open now (admitted, not yet closed).
    public var open = 0
    /// Every accepted connection, including those closed at once for a limit.
    public var accepted = 0
    /// Closed after `tcpIdleTimeout` without a query in flight.
    public var closedIdle = 0
    /// Closed at once because of `maxTCPConnections`, `maxTCPConnectionsPerClient` or
    /// `maxTCPConnectionsPerSubnet`.
    public var closedLimit = 0
    /// Closed after `tcpMaxConnectionLifetime` (`tcp.max-connection-lifetime`), once its
    /// answers were sent.
    public var closedLifetime = 0
    /// Closed after an I/O or framing error.
    public var closedError = 0
    /// Closed by the client (or after the client's half-close, once its answers were sent).
    public var closedClient = 0
    /// Closed by the server's graceful shutdown.
    public var closedShutdown = 0

    public init(
        open: Int = 0, accepted: Int = 0, closedIdle: Int = 0, closedLimit: Int = 0, closedLifetime: Int = 0,
        closedError: Int = 0, closedClient: Int = 0, closedShutdown: Int = 0
    ) {
        self.open = open
        self.accepted = accepted
        self.closedIdle = closedIdle
        self.closedLimit = closedLimit
        self.closedLifetime = closedLifetime
        self.closedError = closedError
        self.closedClient = closedClient
        self.closedShutdown = closedShutdown
    }
}

/// Why a TCP connection was closed.
enum TCPCloseReason: String, Sendable, CaseIterable {
    case idle
    case limit
    case lifetime
    case error
    case client
    case shutdown
}

/// Thread-safe counters shared by all handlers of one server: one `EventCounter` per event,
/// read by `snapshot()` for the status page and exported, for the DNS service's listener, as
/// `dns_queries_received_total{transport}` and `dns_tcp_connections_total{event}`. The
/// per-query counters are atomics (no lock on the answer path); the rest change rarely and
/// sit behind a mutex.
final class DNSServerCounters: Sendable {
    private let state = Mutex(DNSServerStats())
    private let udpQueriesReceived: EventCounter
    private let tcpQueriesReceived: EventCounter
    let udpAnswersSent = Atomic<Int>(0)
    let tcpAnswersSent = Atomic<Int>(0)
    private let accepted: EventCounter
    private let closed: [TCPCloseReason: EventCounter]

    /// `factory`: where the events are exported (the executable's bootstrapped factory for
    /// the DNS listener, `TestMetrics` in tests); nil counts them for the status page only.
    init(exportingTo factory: (any MetricsFactory)? = nil) {
        func counter(_ label: String, _ dimensions: [(String, String)]) -> EventCounter {
            factory.map { EventCounter(label: label, dimensions: dimensions, factory: $0) } ?? EventCounter()
        }
        udpQueriesReceived = counter("dns_queries_received_total", [("transport", "udp")])
        tcpQueriesReceived = counter("dns_queries_received_total", [("transport", "tcp")])
        accepted = counter("dns_tcp_connections_total", [("event", "accepted")])
        var closed: [TCPCloseReason: EventCounter] = [:]
        for reason in TCPCloseReason.allCases {
            // A shutdown closes every connection at once; it is not a connection event to watch.
            closed[reason] =
                reason == .shutdown
                ? EventCounter() : counter("dns_tcp_connections_total", [("event", "closed_\(reason.rawValue)")])
        }
        self.closed = closed
    }

    func queryReceived(over transport: DNSTransport) {
        (transport == .tcp ? tcpQueriesReceived : udpQueriesReceived).increment()
    }

    /// Every accepted connection, including those closed at once for a limit.
    func connectionAccepted(admitted: Bool) {
        if admitted { state.withLock { $0.tcp.open += 1 } }
        accepted.increment()
    }

    func snapshot() -> DNSServerStats {
        var stats = self.state.withLock { $0 }
        stats.udpQueriesReceived = udpQueriesReceived.value
        stats.tcpQueriesReceived = tcpQueriesReceived.value
        stats.udpAnswersSent = self.udpAnswersSent.load(ordering: .relaxed)
        stats.tcpAnswersSent = self.tcpAnswersSent.load(ordering: .relaxed)
        stats.tcp.accepted = accepted.value
        func closedBy(_ reason: TCPCloseReason) -> Int { closed[reason]?.value ?? 0 }
        stats.tcp.closedIdle = closedBy(.idle)
        stats.tcp.closedLimit = closedBy(.limit)
        stats.tcp.closedLifetime = closedBy(.lifetime)
        stats.tcp.closedError = closedBy(.error)
        stats.tcp.closedClient = closedBy(.client)
        stats.tcp.closedShutdown = closedBy(.shutdown)
        return stats
    }

    func update(_ body: (inout DNSServerStats) -> Void) {
        self.state.withLock { body(&$0) }
    }

    func connectionClosed(_ reason: TCPCloseReason, wasOpen: Bool) {
        closed[reason]?.increment()
        if wasOpen { state.withLock { $0.tcp.open -= 1 } }
    }
}

/// Answers the response rate limit dropped or slipped (`RateLimitedResponder`):
/// `dns_rrl_responses_total{action}`.
final class RateLimitCounts: Sendable {
    let limited = EventCounter(label: "dns_rrl_responses_total", dimensions: [("action", "dropped")])
    let slipped = EventCounter(label: "dns_rrl_responses_total", dimensions: [("action", "slipped")])
}
