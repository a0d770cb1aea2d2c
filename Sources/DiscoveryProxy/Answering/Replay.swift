import EventCounting
import Metrics

/// Replayable answers: the fast path of a cache hit.
///
/// An answer built from data that has not changed since is the same bytes for the same query
/// bytes (apart from the ID): TTLs are the fixed cap (RFC 8766 §5.5.1), owner names are the
/// query's own spelling, and the size limit comes from the query's EDNS OPT. So the front ends
/// may keep the encoded answer and replay it, patched with the new ID, for byte-identical
/// queries from the same client, as long as the ticket is current. Every change that could
/// alter an answer (a record added or removed, a browse released, a reload) moves the proxy's
/// epoch on, which retires every ticket issued before it.
public struct ReplayTicket: Sendable {
    /// The proxy's epoch when the query started; current while it has not moved.
    let epoch: UInt64
    /// How long a front end may replay the answer before asking the proxy again (whether it is
    /// current is the epoch's business, not age's): a quarter of the browse idle timeout, so
    /// that the browses replayed answers come from stay in use, and at most 10 s.
    public let lifetime: Duration
    /// Which counter of `ProxyStats` a replay adds to, as the original answer did.
    let kind: Kind
    /// The metric counters a replay adds to, found when the answer was counted: every loop's
    /// replay cache reports each entry every second, on its event loop, where a metric lookup
    /// (under the metrics lock) per entry would hold up the queries behind it.
    let counters: AnswerCounters

    enum Kind: Sendable {
        case hit
        case immediate
        case refused
    }

    static func lifetime(browseIdleTimeout: Duration) -> Duration {
        min(.seconds(10), browseIdleTimeout / 4)
    }
}

/// An encoded answer (nil: send nothing) and, when it may be replayed, its ticket.
public struct ProxyReply: Sendable {
    public var bytes: [UInt8]?
    public var replay: ReplayTicket?

    public init(bytes: [UInt8]?, replay: ReplayTicket? = nil) {
        self.bytes = bytes
        self.replay = replay
    }
}

extension DiscoveryProxy {
    /// Whether an answer issued with `ticket` is still what the proxy would answer now. One
    /// atomic load: this runs for every replayed query.
    public func isCurrent(_ ticket: ReplayTicket) -> Bool {
        ticket.epoch == currentEpoch
    }

    /// Counts answers the front ends replayed, in batches, as if the proxy had given them:
    /// queries by transport/qtype/rcode and the hit/immediate/refused counters. Replays are
    /// not timed one by one (that would put a histogram lock back on the fast path); the
    /// benchmark measures them instead.
    public func replayed(_ ticket: ReplayTicket, count: Int) {
        guard count > 0 else { return }
        countReplays(ticket.kind, count)
        ticket.counters.queries.increment(by: count)
        ticket.counters.replayed.increment(by: Int64(count))
    }
}
