/// Counters of the proxy logic, read by the admin/metrics layer and by tests.
public struct ProxyStats: Sendable, Equatable, Codable {
    public var queries = 0
    /// Answered at once from a live browse (no multicast sent).
    public var cacheHits = 0
    /// Started or joined an mDNS query.
    public var cacheMisses = 0
    /// Answered from a released browse's last results while a fresh browse started.
    public var optimisticAnswers = 0
    /// Answered from configuration (apex, metadata, enumeration).
    public var immediate = 0
    /// Misses that ended with no data after the negative timeout.
    public var negativeTimeouts = 0
    public var refused = 0
    /// Of `refused`: clients outside the allowed prefixes.
    public var aclRefused = 0
    public var formErr = 0
    public var notImp = 0
    public var servFail = 0
    public var badVers = 0
    /// mDNS queries started (avahi record browsers created).
    public var mdnsQueriesStarted = 0
    /// Queries delayed or refused by the per-link mDNS rate limit (RFC 8766 §9.3).
    public var rateLimited = 0
    public var activeBrowses = 0
    public var browsesReleased = 0
    /// Of `browsesReleased`: released early to stay within `maxBrowses`.
    public var browsesEvicted = 0

    public init() {}
}
