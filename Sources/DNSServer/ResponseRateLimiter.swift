import DNSWire
import EventCounting
import Synchronization

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
