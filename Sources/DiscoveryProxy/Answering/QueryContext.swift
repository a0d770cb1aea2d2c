import DNSWire

/// What answering a query needs besides the message: who asked and so where the answer
/// goes, how big it may be, how it is tailored to its client (and so whether other clients
/// may share it), and what its metrics are labelled with.
struct QueryContext: Sendable {
    var started: Duration
    /// The proxy's epoch when the query arrived, for its `ReplayTicket`.
    var epoch: UInt64
    /// How long its answer may be replayed before the proxy is asked again.
    var replayLifetime: Duration
    var qtype: String
    var limit: Int
    var asker: Asker
    /// Set for queries whose hit answer may be shared with other clients (`AnswerMemo`): a
    /// client's mDNS query whose answer is not tailored to it (below).
    var memoKey: AnswerMemo.Key? = nil
    /// The connection's idle timeout, announced in the answer's edns-tcp-keepalive (RFC 7828):
    /// set when a TCP query asked. Such an answer is for this connection now, so neither
    /// replayed nor shared.
    var tcpKeepalive: Duration? = nil
    /// The client is in another private address realm than the link (`PrivateRealms`): its
    /// answers leave the link's private addresses out, so they are not shared either.
    var hidesPrivateAddresses = false

    /// A bounded set of metric label values: the common types by name, the rest as "other".
    static func label(for type: RRType) -> String {
        switch type {
        case .a, .aaaa, .ptr, .srv, .txt, .soa, .ns, .any, .cname, .ds, .nsec: return "\(type)"
        default: return "other"
        }
    }
}

/// Who asked a query, and so where its answer goes.
enum Asker: Sendable {
    /// A client, over `transport`: the answer is encoded within the size limit, sent through
    /// `respond`, and counted.
    case client(DNSTransport, respond: @Sendable (ProxyReply) -> Void)
    /// A part of a client's composite query (one type of an NSEC answer, `NSECSynthesis`):
    /// the answer goes to the composite as a message, neither encoded, sent, nor counted as an
    /// answer (the composite's is); its cache hits and misses are the client's.
    case part(@Sendable (Message) -> Void)
    /// The proxy itself (the link inventory): it uses the cache like any query, but its hits
    /// and misses are not clients', and the answer comes back as a message.
    case proxy(@Sendable (Message) -> Void)

    /// Whether its cache hits and misses count in `ProxyStats`.
    var isClient: Bool {
        if case .proxy = self { return false }
        return true
    }
}

/// How the cache served a query (the `cache` label of `dns_answer_duration_seconds`).
enum CacheOutcome: String, Sendable, CaseIterable {
    /// From a live browse, at once.
    case hit
    /// After waiting for mDNS, or refused for the cache's limits (SERVFAIL).
    case miss
    /// From a released browse's last results while a fresh browse starts.
    case optimistic
    /// From configuration, or refused, without the cache.
    case immediate
    /// A failure before or instead of an answer (FORMERR, the browse dropped by a reload).
    case error
}
