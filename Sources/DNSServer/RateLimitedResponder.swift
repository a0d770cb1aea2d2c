import EventCounting
import Synchronization

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
