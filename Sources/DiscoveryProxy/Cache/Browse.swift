import DNSWire
import MDNS

/// Identifies one shared mDNS query: every unicast query for the same name and type on the
/// same link uses the same browse (and the same avahi object). It is the backend's question
/// itself, so that keys and the questions the backend reports events for need no conversion.
typealias BrowseKey = MDNSQuestion

/// What a browse keeps per record beside the `MDNSRecord` it is keyed by (whose owner name,
/// type and received RDATA it does not repeat): 32 bytes (`BrowseStorageTests` checks), as
/// there is one per record of every browse. Names stay as mDNS gave them (in `.local.`); rewriting into the link zone is done
/// per answer (`ZonePresentation`), as a translated copy would be one more name per
/// PTR and SRV record, and so per known instance.
struct RecordState: Sendable {
    /// The decoded RDATA where it shares the received bytes (a PTR target, TXT, addresses).
    /// Other types (an SRV: its target is a name of its own) are decoded from the received
    /// bytes when read (`CachedRecord`); nil for those, and for undecodable RDATA.
    var rdata: RData?
    private var seenAtNanoseconds: Int64
    /// Arrival order, so answers list instances stably.
    private var orderValue: Int32
    /// How many deliveries of the record mDNS has made and not withdrawn (avahi delivers it
    /// once per IP protocol); it is gone at zero. Zero while a verification is pending.
    var copies: UInt8 = 1
    /// The received RDATA decodes (checked on arrival).
    var decodes: Bool

    init(order: Int, seenAt: Duration, rdata: RData?, decodes: Bool) {
        self.rdata = rdata
        self.decodes = decodes
        self.seenAtNanoseconds = seenAt.nanoseconds
        self.orderValue = Int32(truncatingIfNeeded: order)
    }

    var order: Int { Int(orderValue) }
    /// When it arrived (scheduler time), for the status page's freshness.
    var seenAt: Duration { .nanoseconds(seenAtNanoseconds) }
}

extension RecordState {
    /// Decodes an mDNS record on arrival, and keeps the decoded RDATA where it can share the
    /// received bytes. Its names stay in `.local`: answers rewrite them into the link zone
    /// (`ZonePresentation`).
    init(_ record: MDNSRecord, order: Int, seenAt: Duration) {
        let decoded = try? RData(type: record.type, wire: record.rdata)
        // A PTR's RDATA is its target's wire form; TXT and addresses are copied verbatim.
        var kept: RData? = nil
        switch decoded {
        case .ptr(let target)? where target.wireBytes == record.rdata:
            kept = .ptr(target.sharingStorage(with: record.rdata))
        case .txt(let bytes)? where bytes == record.rdata: kept = .txt(record.rdata)
        case .a(let bytes)? where bytes == record.rdata: kept = .a(record.rdata)
        case .aaaa(let bytes)? where bytes == record.rdata: kept = .aaaa(record.rdata)
        default: break
        }
        self.init(order: order, seenAt: seenAt, rdata: kept, decodes: decoded != nil)
    }
}

/// A cached record as answers, pushes and the status page use it: the mDNS record's owner
/// name and type, its decoded RDATA, and what the browse keeps for it. Built when read, not
/// stored.
struct CachedRecord: Sendable {
    /// The mDNS owner name (in `.local.`), for additional-record owners.
    var localName: DNSName
    var type: RRType
    /// Names in `.local.`; nil when undecodable.
    var rdata: RData?
    var state: RecordState

    init(_ record: MDNSRecord, _ state: RecordState) {
        self.localName = record.name
        self.type = record.type
        self.rdata = state.rdata ?? (state.decodes ? try? RData(type: record.type, wire: record.rdata) : nil)
        self.state = state
    }

    var order: Int { state.order }
    var seenAt: Duration { state.seenAt }

    /// For PTR: the `.local` name it points at (an instance, or a type for `_services`).
    var ptrTarget: DNSName? {
        if case .ptr(let target)? = rdata { return target }
        return nil
    }

    /// For PTR and SRV: the `.local` name the RDATA points at, to find additional records.
    var localTarget: DNSName? {
        switch rdata {
        case .ptr(let target)?, .srv(_, _, _, let target)?: return target
        default: return nil
        }
    }
}

/// A query waiting for mDNS (a cache miss).
struct Waiter: Sendable {
    var id: Int
    var query: Message
    var plan: MDNSPlan
    var deadline: Duration
    var context: QueryContext
    /// When the browse's first record arrived, for the per-query timing in the debug log.
    var firstResultAt: Duration? = nil
}

/// One live mDNS query and what it has found so far: the cache entry of the proxy. Stored
/// inline in the browse map, one slot per browse, so kept small (72 bytes,
/// `BrowseStorageTests` checks): times as
/// nanoseconds, counters of 32 bits, and flags last.
struct Browse: Sendable {
    var records = MDNSRecordTable<RecordState>()
    var handle: (any MDNSQueryHandle)?
    var waiters: [Waiter] = []
    private var startedAtNanoseconds: Int64
    private var lastUsedNanoseconds: Int64
    /// The tag of its mDNS query (`BrowseTable.nextGeneration`).
    var generation: UInt32
    /// Arrival order of the next record (wraps after 2^31 records in one browse).
    private var nextOrderValue: Int32 = 0
    /// mDNS has delivered results since the query (re)started: from now on the record set is
    /// the truth, even when removals have emptied it.
    var hasResults = false
    /// A RECONFIRM restarted the mDNS query: records not delivered again by its next
    /// "all for now" are gone (`MDNSEvent.verifying`).
    var verifying = false
    /// The daemon has delivered what it had cached ("all for now"): the query is asking the
    /// link, not waiting in the backend's queue. What the gateway's held-back reports wait for.
    var drained = false

    init(generation: UInt32, startedAt: Duration, lastUsed: Duration) {
        self.generation = generation
        self.startedAtNanoseconds = startedAt.nanoseconds
        self.lastUsedNanoseconds = lastUsed.nanoseconds
    }

    /// When the mDNS query began (or will begin, when rate-limited); a browse older than the
    /// negative timeout with no records is a known negative.
    var startedAt: Duration {
        get { .nanoseconds(startedAtNanoseconds) }
        set { startedAtNanoseconds = newValue.nanoseconds }
    }
    var lastUsed: Duration {
        get { .nanoseconds(lastUsedNanoseconds) }
        set { lastUsedNanoseconds = newValue.nanoseconds }
    }
    var nextOrder: Int {
        get { Int(nextOrderValue) }
        set { nextOrderValue = Int32(truncatingIfNeeded: newValue) }
    }

    /// mDNS has had its full say: results came, or the query ran `DiscoveryProxy.mdnsWindow`.
    func isSettled(now: Duration) -> Bool {
        hasResults || now - startedAt >= DiscoveryProxy.mdnsWindow
    }

    /// Whether a query can be answered from this browse now (a cache hit, RFC 8766 §5.6):
    /// it has had results, or has run the full negative timeout without any. The timeout is
    /// the link's learned one (`BrowseTable.negativeTimeout(on:_:)`), looked up only when
    /// there are no results: a hit does not pay for it.
    func isEstablished(now: Duration, negativeTimeout: @autoclosure () -> Duration) -> Bool {
        hasResults || now - startedAt >= negativeTimeout()
    }

    /// When a query joining now gets its answer at the latest: at the end of this browse's
    /// own negative timeout, as every waiter shares what the browse found.
    func deadline(joiningAt now: Duration, negativeTimeout: Duration) -> Duration {
        (startedAt > now ? now : startedAt) + negativeTimeout
    }

    var orderedRecords: [CachedRecord] {
        records.map { CachedRecord($0.record, $0.value) }.sorted { $0.order < $1.order }
    }
}

/// The last results of a released browse, kept for optimistic answers.
struct ReleasedBrowse: Sendable {
    var records: [CachedRecord]
    var releasedAt: Duration
}

extension BrowseTable {
    /// Types whose browses often share a name: an instance's SRV and TXT, a host's A and AAAA.
    private static let siblingTypes: [RRType] = [.srv, .txt, .a, .aaaa]

    /// `key` with its name in storage the proxy already holds, when something holds the very
    /// same bytes: another browse at that name (an instance's SRV for its TXT), or the PTR
    /// record that named the instance (its RDATA is the instance name's wire form). A new
    /// browse otherwise keeps the copy its query brought: one more name per browse, and the
    /// proxy holds two browses per known instance. Called when a browse is created.
    func sharingStorage(_ key: BrowseKey) -> BrowseKey {
        var key = key
        for type in Self.siblingTypes where type != key.type {
            let sibling = BrowseKey(interface: key.interface, name: key.name, type: type)
            guard let index = browses.index(forKey: sibling) else { continue }
            let stored = browses.keys[index].name.wireBytes
            if stored == key.name.wireBytes {
                key.name = key.name.sharingStorage(with: stored)
                return key
            }
        }
        guard key.type == .srv || key.type == .txt, key.name.labelCount > 1 else { return key }
        let parent = key.name.dropping(labels: 1)
        let probe = MDNSRecord(name: parent, type: .ptr, rdata: key.name.wireBytes)
        if let stored = browses[BrowseKey(interface: key.interface, name: parent, type: .ptr)]?
            .records.storedRecord(equalTo: probe)
        {
            key.name = key.name.sharingStorage(with: stored.rdata)
        }
        return key
    }
}
