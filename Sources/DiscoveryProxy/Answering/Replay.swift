import DNSWire
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

/// Encoded cache-hit answers by query, shared by every client: a client's first query for a
/// question another client has asked since the last change gets a copy of that answer with
/// its own ID, instead of a snapshot, a `Message` and an ldns encoding (measured in
/// docs/BENCHMARKS.md: the copy is an order of magnitude cheaper).
///
/// The front ends' replay caches do the same per client and per event loop, without the
/// proxy; this is the shared level behind them, so that many clients asking the same few
/// questions (a site's laptops browsing for printers) cost one encoding, not one each.
///
/// Keyed by the query's bytes after the ID (name as spelled, flags, EDNS OPT) and the
/// transport (the size limit). Valid for one epoch only (`DiscoveryProxy.invalidateReplays`):
/// any change that could alter an answer retires every entry, as it retires replay tickets.
/// Bounded in entries and in answer bytes; when full it starts over.
struct AnswerMemo: Sendable {
    struct Key: Hashable, Sendable {
        /// The query without its ID.
        var query: [UInt8]
        var transport: DNSTransport

        init(query message: [UInt8], transport: DNSTransport) {
            self.query = Array(message.dropFirst(2))
            self.transport = transport
        }

        func hash(into hasher: inout Hasher) {
            query.withUnsafeBytes { hasher.combine(bytes: $0) }
            hasher.combine(transport)
        }
    }

    struct Answer: Sendable {
        /// The encoded answer; its ID is the first query's and is replaced on each use.
        var bytes: [UInt8]
        /// Its rcode as the metrics label it.
        var rcode: String
    }

    private var entries: [Key: Answer] = [:]
    /// The epoch all entries belong to.
    private var epoch: UInt64 = 0
    private var answerBytes = 0
    let maxEntries: Int
    let maxAnswerBytes: Int

    init(maxEntries: Int = 4096, maxAnswerBytes: Int = 1 << 20) {
        self.maxEntries = maxEntries
        self.maxAnswerBytes = maxAnswerBytes
    }

    var count: Int { entries.count }

    /// The answer stored for `key` in `epoch`, with `id` patched in.
    func answer(to key: Key, id: UInt16, epoch: UInt64) -> Answer? {
        guard epoch == self.epoch, var answer = entries[key], answer.bytes.count >= 2 else { return nil }
        answer.bytes[0] = UInt8(id >> 8)
        answer.bytes[1] = UInt8(id & 0xFF)
        return answer
    }

    /// Stores an answer built from the data of `epoch`. A newer epoch drops every older entry;
    /// an answer from an older epoch than the entries' is already out of date and not kept.
    mutating func store(_ answer: Answer, for key: Key, epoch: UInt64) {
        guard epoch >= self.epoch, answer.bytes.count <= maxAnswerBytes else { return }
        if epoch > self.epoch || entries.count >= maxEntries || answerBytes + answer.bytes.count > maxAnswerBytes {
            entries.removeAll(keepingCapacity: epoch == self.epoch)
            answerBytes = 0
            self.epoch = epoch
        }
        if let old = entries.updateValue(answer, forKey: key) { answerBytes -= old.bytes.count }
        answerBytes += answer.bytes.count
    }
}
