/// Counters of the proxy logic, read by the admin/metrics layer and by tests. Each is read
/// from the one place its event is counted; the answers by RCODE are `dns_queries_total`'s.
///
/// The invariant between them (`isBalanced`): every query taken is answered, dropped or in
/// flight, `queries == answered + dropped + inFlight`, exact whenever no query arrives or is
/// answered while they are read (replays count once their front end reports them, within 1 s).
public struct ProxyStats: Sendable, Equatable, Codable {
    /// Client queries the proxy took, replayed ones included.
    public var queries = 0
    /// Answers sent, by every RCODE (`dns_queries_total`).
    public var answered = 0
    /// Not answered at all: a response, or no DNS header (`dns_queries_dropped_total`).
    public var dropped = 0
    /// Taken and not answered yet (waiting for mDNS, mostly).
    public var inFlight = 0
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

    /// `queries == answered + dropped + inFlight`.
    public var isBalanced: Bool { queries == answered + dropped + inFlight }
}
