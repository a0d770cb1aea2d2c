/// A token bucket: `rate` tokens a second, at most `burst` saved. It paces the mDNS queries
/// the proxy starts on a link (RFC 8766 §9.3: ~20 packets/s suits 802.11) and the gateway's
/// announcements there (`AnnouncementQueue`).
public struct TokenBucket: Sendable {
    public private(set) var rate: Double
    public private(set) var burst: Double
    private var tokens: Double
    private var last: Duration

    public init(rate: Double, burst: Double, now: Duration) {
        self.rate = max(rate, 0.001)
        self.burst = max(burst, 1)
        self.tokens = self.burst
        self.last = now
    }

    /// Whole tokens free at `now`, none taken.
    public mutating func available(now: Duration) -> Int {
        refill(now)
        return max(0, Int(tokens.rounded(.down)))
    }

    /// How long after `now` the next whole token is free (zero if one is).
    public mutating func untilNext(now: Duration) -> Duration {
        refill(now)
        if tokens >= 1 { return .zero }
        return .milliseconds(Int(((1 - tokens) / rate) * 1000) + 1)
    }

    private mutating func refill(_ now: Duration) {
        let elapsed = (now - last) / .seconds(1)
        tokens = min(burst, tokens + max(0, elapsed) * rate)
        last = now
    }

    /// Takes a token, returning how long the caller must wait before using it (zero when one
    /// is free now). Reservations queue up: the bucket may go negative.
    public mutating func reserve(now: Duration) -> Duration {
        refill(now)
        tokens -= 1
        if tokens >= 0 { return .zero }
        return .milliseconds(Int((-tokens / rate) * 1000) + 1)
    }

    /// Another rate and burst from `now` on; the whole tokens saved stay saved, up to the new
    /// burst (a change of rate is no new burst).
    public mutating func retune(rate: Double, burst: Double, now: Duration) {
        refill(now)
        self.rate = max(rate, 0.001)
        self.burst = max(burst, 1)
        tokens = min(self.burst, max(0, tokens.rounded(.down)))
    }

    /// Returns an unused reservation.
    public mutating func refund() { tokens = min(burst, tokens + 1) }
}
