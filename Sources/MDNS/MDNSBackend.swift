import DNSWire

// The mDNS backend's contract, the token bucket that paces its queries, and names in avahi's text.

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

    // Written out and inlinable, as synthesized they would be: every cache hit hashes its
    // browse's key, and this module is built for size (`coldSwiftSettings`), its callers for
    // speed (docs/BENCHMARKS.md, "Footprint, step 7").
    @inlinable public static func == (a: MDNSQuestion, b: MDNSQuestion) -> Bool {
        a.interface == b.interface && a.name == b.name && a.type == b.type
    }

    @inlinable public func hash(into hasher: inout Hasher) {
        hasher.combine(interface)
        hasher.combine(name)
        hasher.combine(type)
    }
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

    // Inlinable, as `MDNSQuestion`'s: a browse's records are compared at every answer.
    @inlinable public static func == (a: MDNSRecord, b: MDNSRecord) -> Bool {
        a.name == b.name && a.type == b.type && a.rrClass == b.rrClass && a.rdata == b.rdata
    }

    @inlinable public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(type)
        hasher.combine(rrClass)
        hasher.combine(rdata)
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
/// Threading contract: receivers are called on a backend thread (`LocalRecordsBackend`: also
/// on the threads that change its records), serially per query, and must not call back into
/// the backend synchronously (avahi's poll lock is held during callbacks).
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

// MARK: - Pacing

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

// MARK: - Names in avahi's text

/// Converts between `DNSName` (raw label bytes) and avahi's textual domain names.
///
/// avahi's rules (avahi-common/domain.c, 0.8): `avahi_escape_label` writes `.` and `\` as
/// `\.` and `\\`, keeps `_`, `-`, `0-9`, `a-z`, `A-Z` as they are, and writes every other byte
/// (space, `@`, each byte of a UTF-8 sequence, ...) as `\DDD` in decimal. `avahi_unescape_label`
/// accepts `\.`, `\\` and `\DDD` (1...255), rejects any other backslash pair, rejects `\000`,
/// and rejects a label that is not valid UTF-8. So labels with NUL bytes or invalid UTF-8
/// cannot be asked for through avahi at all.
enum AvahiName {
    /// avahi's `AVAHI_DOMAIN_NAME_MAX`, including the terminating NUL.
    static let maxTextLength = 1014

    /// The escaped text of one label, exactly as `avahi_escape_label` produces it.
    static func escape(label: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(label.count)
        for byte in label {
            switch byte {
            case UInt8(ascii: "."), UInt8(ascii: "\\"):
                out.append(UInt8(ascii: "\\"))
                out.append(byte)
            case UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "\\"))
                out.append(UInt8(ascii: "0") + byte / 100)
                out.append(UInt8(ascii: "0") + (byte / 10) % 10)
                out.append(UInt8(ascii: "0") + byte % 10)
            }
        }
        // Only ASCII was written.
        return String(decoding: out, as: UTF8.self)
    }

    /// The name as avahi text (labels joined by `.`, no trailing dot; `""` for the root), or nil
    /// when avahi would reject it: a label with a NUL byte or invalid UTF-8, or text too long.
    static func escape(_ name: DNSName) -> String? {
        var parts: [String] = []
        parts.reserveCapacity(name.labels.count)
        for label in name.labels {
            guard !label.contains(0), String(validating: label, as: UTF8.self) != nil else { return nil }
            parts.append(self.escape(label: label))
        }
        let text = parts.joined(separator: ".")
        guard text.utf8.count < self.maxTextLength else { return nil }
        return text
    }

    /// Parses avahi text into labels. Accepts what `avahi_unescape_label` accepts plus, leniently,
    /// `\x` for any other character x (taken literally): DNS presentation format, byte for byte.
    /// A trailing dot is optional; `""` and `"."` are the root. Nil for an empty inner label, a
    /// bad escape, or an invalid `DNSName`.
    static func unescape<Bytes: Collection<UInt8>>(_ text: Bytes) -> DNSName? {
        try? DNSName(presentation: text)
    }

    /// Parses the NUL-terminated text avahi hands to a callback; copies it.
    static func unescape(cString: UnsafePointer<CChar>) -> DNSName? {
        let length = strlenBytes(cString)
        return cString.withMemoryRebound(to: UInt8.self, capacity: length) { pointer in
            self.unescape(UnsafeBufferPointer(start: pointer, count: length))
        }
    }

    private static func strlenBytes(_ pointer: UnsafePointer<CChar>) -> Int {
        var length = 0
        while pointer[length] != 0 { length += 1 }
        return length
    }
}
