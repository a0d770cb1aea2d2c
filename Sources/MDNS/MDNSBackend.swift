import DNSWire

/// One continuous mDNS question on one link: "tell me every record of `type` at `name`
/// seen on interface `interface`", for as long as the query is held.
///
/// `name` is in `.local.` (or a reverse name, RFC 6762 §4); the proxy maps zone names to
/// these and back. `type` may be ANY.
public struct MDNSQuestion: Hashable, Sendable, CustomStringConvertible {
    public var interface: String
    public var name: DNSName
    public var type: RRType

    public init(interface: String, name: DNSName, type: RRType) {
        self.interface = interface
        self.name = name
        self.type = type
    }

    public var description: String { "\(name) \(type) on \(interface)" }
}

/// A record as mDNS delivered it: raw RDATA, class with the cache-flush bit masked.
/// avahi does not expose TTLs; callers apply their own (RFC 8766 §5.5.1 caps unicast at 10 s).
public struct MDNSRecord: Hashable, Sendable {
    public var name: DNSName
    public var type: RRType
    public var rrClass: RRClass
    public var rdata: [UInt8]

    public init(name: DNSName, type: RRType, rrClass: RRClass = .in, rdata: [UInt8]) {
        self.name = name
        self.type = type
        self.rrClass = rrClass
        self.rdata = rdata
    }
}

extension MDNSRecord {
    /// A record of a received mDNS message, its RDATA uncompressed; nil when that does not encode.
    init?(heard record: ResourceRecord) {
        guard let rdata = try? record.rdata.wireBytes() else { return nil }
        self.init(name: record.name, type: record.type, rdata: rdata)
    }

    /// RFC 6762 §10: 120 s for records carrying a host name or address, 75 minutes otherwise.
    public static func defaultTTL(for type: RRType) -> UInt32 {
        switch type {
        case .srv, .a, .aaaa, .hinfo: return 120
        default: return 4500
        }
    }
}

/// Events of one query. The backend keeps no copy of the records: holders count them. A
/// record may be delivered more than once (avahi reports it once per IP protocol it was seen
/// on), and it is gone when it has been removed as many times as it was added.
public enum MDNSEvent: Hashable, Sendable {
    /// A record appeared, or appeared on one more IP protocol.
    case added(MDNSRecord)
    /// One delivery of a record went away (goodbye, TTL expiry, cache flush).
    case removed(MDNSRecord)
    /// The daemon has delivered everything it had cached; more may follow from the network.
    case allForNow
    /// The query was restarted to verify its records (`MDNSBackend.reconfirm`): every record
    /// still there is delivered again as `.added`, and holders count from zero. Records not
    /// delivered again by the next `.allForNow` are gone.
    case verifying
    /// The query broke (its browser failed, or avahi-daemon has been away too long to trust
    /// what it delivered). The backend re-creates it when it can and then delivers `.restarted`
    /// followed by fresh `.added` events; holders must drop what they had when they see
    /// `.restarted`. A daemon that restarts or stalls briefly costs no `.failed`: its queries
    /// get `.verifying` when their browsers are made again.
    case failed(String)
    case restarted
}

/// A held mDNS query. Cancelling releases the underlying avahi object (later, off the caller's
/// thread); no events are delivered after `cancel()` returns, but one that was already being
/// delivered. Cancelling twice is harmless.
public protocol MDNSQueryHandle: AnyObject, Sendable {
    func cancel()
}

/// Receives the events of the queries started with it, each with the question and the `tag`
/// given when that query started. One receiver serves every query of its holder, so that a
/// query costs no closure context of its own (the proxy holds two queries per known instance).
/// The backend does not keep receivers alive: a receiver that has gone gets no events.
public protocol MDNSQueryReceiver: AnyObject, Sendable {
    /// Called on a backend thread, serially per query; see `MDNSBackend`.
    func receive(_ event: MDNSEvent, for question: MDNSQuestion, tag: UInt32)
}

/// The mDNS side as the proxy sees it. Implementations: `AvahiBackend` (libavahi-client over
/// D-Bus), and a scripted in-memory backend in the tests.
///
/// Threading contract: receivers are called on a backend thread, serially per query, and must
/// not call back into the backend synchronously (avahi's poll lock is held during callbacks).
public protocol MDNSBackend: AnyObject, Sendable {
    /// Starts a continuous query whose events go to `receiver` with `tag`. Throws when the
    /// interface is unknown or the backend refuses (object budget exhausted, too many queued).
    /// Never waits for the daemon: a query it refuses later gets `.failed`.
    func startQuery(
        _ question: MDNSQuestion, tag: UInt32, receiver: any MDNSQueryReceiver
    ) throws(MDNSError) -> any MDNSQueryHandle

    /// Current connection state, for health reporting and logs.
    var state: MDNSBackendState { get }

    /// Asks mDNS to verify `record`, which a client suspects is stale (RFC 6762 §10.4, DNS
    /// Push RECONFIRM, RFC 8765 §6.5). A record found gone is reported as `.removed` to the
    /// live queries for `question`. Called without any lock held by the caller.
    func reconfirm(_ question: MDNSQuestion, record: MDNSRecord)
}

extension MDNSBackend {
    /// Backends that cannot verify a record do nothing; the record goes away at its TTL.
    public func reconfirm(_ question: MDNSQuestion, record: MDNSRecord) {}

    /// Starts a query whose events go to `handler`, for callers with few queries (tools,
    /// tests). The returned handle keeps the handler alive.
    public func startQuery(
        _ question: MDNSQuestion, handler: @escaping @Sendable (MDNSEvent) -> Void
    ) throws(MDNSError) -> any MDNSQueryHandle {
        let receiver = HandlerReceiver(handler: handler)
        return HandlerQuery(receiver: receiver, query: try startQuery(question, tag: 0, receiver: receiver))
    }
}

private final class HandlerReceiver: MDNSQueryReceiver {
    let handler: @Sendable (MDNSEvent) -> Void
    init(handler: @escaping @Sendable (MDNSEvent) -> Void) { self.handler = handler }
    func receive(_ event: MDNSEvent, for question: MDNSQuestion, tag: UInt32) { handler(event) }
}

private final class HandlerQuery: MDNSQueryHandle {
    let receiver: HandlerReceiver
    let query: any MDNSQueryHandle
    init(receiver: HandlerReceiver, query: any MDNSQueryHandle) {
        self.receiver = receiver
        self.query = query
    }
    func cancel() { query.cancel() }
}

public enum MDNSBackendState: String, Sendable {
    case connecting
    case running
    case failed
    /// Connected, but avahi-daemon (or D-Bus) has not answered a call within its deadline.
    case stalled
}

public enum MDNSError: Error, Equatable, Sendable, CustomStringConvertible {
    case unknownInterface(String)
    case budgetExhausted(limit: Int)
    /// New queries wait for the daemon already, as many as the backend queues.
    case busy(queued: Int)
    case daemon(String)

    public var description: String {
        switch self {
        case .unknownInterface(let name): return "unknown network interface \"\(name)\""
        case .budgetExhausted(let limit): return "mDNS query budget of \(limit) objects exhausted"
        case .busy(let queued): return "\(queued) mDNS queries wait for avahi-daemon already"
        case .daemon(let message): return "avahi-daemon: \(message)"
        }
    }
}
